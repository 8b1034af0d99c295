/**
 * The template families llama.cpp renders through a dedicated handler
 * (`common_chat_try_specialized_template`, `common/parsers/*.cpp`) instead
 * of its differential autoparser: how each is recognised from the source,
 * how it adjusts the messages before rendering (gpt-oss and LFM2 read
 * reasoning as `thinking`, Ministral 3 as a `thinking` content block,
 * DeepSeek V4 orders tool results by call, old Gemma 4 templates take tool
 * results inside the assistant turn), and the text it appends when it
 * continues a final assistant message.
 *
 * @module
 */

type Message = Record<string, unknown>;

/** A family name, or "" for the autoparser. */
export type HandlerName =
  | ""
  | "ministral3"
  | "gpt-oss"
  | "muse-glimmer"
  | "functionary-v3.2"
  | "kimi-k2"
  | "kimi-k3"
  | "ling3"
  | "cohere2moe"
  | "lfm2"
  | "gigachat-v3"
  | "minimax-m3"
  | "deepseek-v3.2"
  | "gemma4"
  | "minicpm5"
  | "qwen3-coder";

/** The family of `src` (llama.cpp's detection order). */
export function handlerOf(src: string): HandlerName {
  const has = (s: string) => src.includes(s);
  if (has("[SYSTEM_PROMPT]") && has("[TOOL_CALLS]") && has("[ARGS]") && !has("[CALL_ID]")) {
    return "ministral3";
  }
  if (has("<|channel|>")) return "gpt-oss";
  if (has("<atem:function_calls>") && has("<|eom|>")) return "muse-glimmer";
  if (has(">>>all") && has(">>>${recipient}")) return "functionary-v3.2";
  if (has("<|tool_calls_section_begin|>") && has("<|tool_call_begin|>")) return "kimi-k2";
  if (has("<|open|>") && has("<|close|>") && has("<|end_of_msg|>")) return "kimi-k3";
  if (has("<role>ASSISTANT</role>") && has("<arg_key>")) return "ling3";
  if (has("<|START_TEXT|>") && has("<|START_ACTION|>")) return "cohere2moe";
  if (has("<|tool_list_start|>") && has("<|tool_list_end|>")) return "lfm2";
  if (has("List of tools: [") && !has("<|tool_list_start|>")) return "lfm2";
  if (has("<|role_sep|>") && has("<|message_sep|>") && !has("<|function_call|>")) {
    return "gigachat-v3";
  }
  if (has("]<]minimax[>[") && has("<tool_call>") && has("<invoke name=")) return "minimax-m3";
  if (has("dsml_token") && has("DSML") && (has("function_calls") || has("tool_calls"))) {
    return "deepseek-v3.2";
  }
  if (has("'<|tool_call>call:'")) return "gemma4";
  if (has("Tool usage guidelines:") && has('<function name="') && has('<param name="')) {
    return "minicpm5";
  }
  if (
    has("<tool_call>") && has("<function=") && has("<parameter=") &&
    !has("'<tool_call><function=' ~ tool_call.name ~ '>'")
  ) {
    return "qwen3-coder";
  }
  return "";
}

/**
 * Whether `name`'s handler reports thinking support (llama-server's default
 * `enable_thinking`); undefined for the autoparser, which reads it from the
 * reasoning markers it finds.
 */
export function handlerSupportsThinking(name: HandlerName, src: string): boolean | undefined {
  switch (name) {
    case "":
      return undefined;
    case "functionary-v3.2":
    case "gigachat-v3":
      return false;
    case "qwen3-coder":
      return src.includes("<think>");
    default:
      return true;
  }
}

/**
 * DeepSeek V4: in each run of user and tool messages (one user block), the
 * tool results take the order of the calls of the assistant message before
 * (by call id; an unknown id ranks first), in the slots tool results had
 * (llama.cpp's `deepseek_v4_sort_tool_results`).
 */
function sortToolResults(messages: Message[]): Message[] {
  const out = [...messages];
  let callOrder = new Map<string, number>();
  for (let i = 0; i < out.length;) {
    const msg = out[i];
    if (msg.role === "assistant" && hasToolCalls(msg)) {
      callOrder = new Map();
      (msg.tool_calls as Message[]).forEach((call, idx) => {
        if (typeof call.id === "string" && call.id !== "") callOrder.set(call.id, idx);
      });
      i++;
      continue;
    }
    if (msg.role !== "user" && msg.role !== "tool") {
      i++;
      continue;
    }
    const slots: number[] = [];
    let end = i;
    for (; end < out.length; end++) {
      if (out[end].role === "tool") slots.push(end);
      else if (out[end].role !== "user") break;
    }
    if (slots.length > 1 && callOrder.size > 0) {
      const rank = (m: Message) => callOrder.get(String(m.tool_call_id ?? "")) ?? 0;
      const results = slots.map((at) => out[at]).map((m, k) => [m, k] as const)
        .sort((x, y) => rank(x[0]) - rank(y[0]) || x[1] - y[1]).map(([m]) => m);
      slots.forEach((at, k) => out[at] = results[k]);
    }
    i = end;
  }
  return out;
}

const hasToolCalls = (m: Message) => Array.isArray(m.tool_calls) && m.tool_calls.length > 0;

function hasContent(m: Message): boolean {
  const c = m.content;
  return (typeof c === "string" && c !== "") || (Array.isArray(c) && c.length > 0);
}

/**
 * Old Gemma 4 templates: an assistant's tool calls, the tool results after
 * them and a final plain answer become one assistant message with
 * `tool_responses` (llama.cpp's `convert_tool_responses_gemma4`).
 */
function gemma4ToolResponses(messages: Message[]): Message[] {
  const out: Message[] = [];
  let i = 0;
  while (i < messages.length) {
    const msg = messages[i];
    if (msg.role !== "assistant" || !hasToolCalls(msg)) {
      out.push(msg);
      i++;
      continue;
    }
    const toolCalls = [...(msg.tool_calls as Message[])];
    const responses: Message[] = [];
    const reasoning = typeof msg.reasoning_content === "string" ? msg.reasoning_content : undefined;
    let content: unknown;
    i++;
    while (i < messages.length && messages[i].role === "tool") {
      const tool = messages[i];
      let response: unknown = null;
      if ("content" in tool) {
        response = tool.content;
        if (typeof tool.content === "string") {
          try {
            response = JSON.parse(tool.content);
          } catch {
            response = tool.content;
          }
        }
      }
      const call = toolCalls[responses.length] as { function?: { name?: unknown } } | undefined;
      let name = typeof call?.function?.name === "string" ? call.function.name : "";
      if (name === "") name = typeof tool.tool_call_id === "string" ? tool.tool_call_id : "";
      responses.push({ name, response });
      i++;
    }
    if (i < messages.length && messages[i].role === "assistant") {
      const next = messages[i];
      if (!hasToolCalls(next) && hasContent(next)) {
        content = next.content;
        i++;
      }
    }
    const built: Message = { role: "assistant", tool_calls: toolCalls };
    if (responses.length > 0) built.tool_responses = responses;
    if (content !== undefined && content !== null) built.content = content;
    if (reasoning !== undefined) built.reasoning_content = reasoning;
    out.push(built);
  }
  return out;
}

/** The messages `name`'s handler renders. */
export function prepareForHandler(
  name: HandlerName,
  src: string,
  messages: Message[],
): { name: HandlerName; messages: Message[] } {
  switch (name) {
    case "ministral3":
      return {
        name,
        messages: messages.map((msg) => {
          if (msg.role !== "system" && msg.role !== "assistant") return msg;
          const content: unknown[] = [];
          if (typeof msg.reasoning_content === "string") {
            content.push({ type: "thinking", thinking: msg.reasoning_content });
          }
          if (typeof msg.content === "string") content.push({ type: "text", text: msg.content });
          else if (Array.isArray(msg.content)) content.push(...msg.content);
          const adjusted: Message = { ...msg, content };
          delete adjusted.reasoning_content;
          return adjusted;
        }),
      };
    case "gpt-oss":
      return {
        name,
        messages: messages.map((msg) => {
          if (typeof msg.reasoning_content !== "string") return msg;
          const adjusted: Message = { ...msg, thinking: msg.reasoning_content };
          if (Array.isArray(msg.tool_calls) && msg.tool_calls.length > 0) delete adjusted.content;
          return adjusted;
        }),
      };
    case "lfm2":
      return {
        name,
        messages: messages.map((msg) =>
          typeof msg.reasoning_content === "string"
            ? { ...msg, thinking: msg.reasoning_content }
            : msg
        ),
      };
    case "deepseek-v3.2":
      return {
        name,
        messages: src.includes("function_calls") ? messages : sortToolResults(messages),
      };
    case "gemma4":
      return {
        name,
        messages: src.includes("{#- OpenAI Chat Completions:")
          ? messages
          : gemma4ToolResponses(messages),
      };
    default:
      return { name, messages };
  }
}

/** What a continuation appends. */
export interface Continuation {
  src: string;
  /** The prompt rendered so far (without the continued message). */
  prompt: string;
  /** The continued message's reasoning. */
  reasoning: string;
  /** Its text, when the content is continued (undefined: only the reasoning is). */
  content?: string;
  /** The template's own generation prompt (computed on demand). */
  generationPrompt: () => string;
}

/** The text `name`'s handler appends to continue a final assistant message; undefined for the autoparser. */
export function continuationOf(name: HandlerName, c: Continuation): string | undefined {
  const { reasoning, content } = c;
  const think = (start: string, thinkStart: string, thinkEnd: string, between = "") =>
    start + thinkStart + reasoning + (content !== undefined ? thinkEnd + between + content : "");
  switch (name) {
    case "":
      return undefined;
    case "ministral3":
      return think("", "[THINK]", "[/THINK]");
    case "gpt-oss":
      return think(
        "<|start|>assistant<|channel|>analysis<|message|>",
        "",
        "<|end|><|start|>assistant<|channel|>final<|message|>",
      );
    case "muse-glimmer":
      return think(
        "<|start|>assistant to=self<|message|>",
        "",
        "<|eom|><|start|>assistant to=user<|message|>",
      );
    case "functionary-v3.2":
      return "<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n" + (content ?? "");
    case "kimi-k2":
      return think("<|im_assistant|>assistant<|im_middle|>", "<think>", "</think>");
    case "kimi-k3":
      return think(
        '<|open|>message role="assistant"<|sep|>',
        "<|open|>think<|sep|>",
        "<|close|>think<|sep|>",
        "<|open|>response<|sep|>",
      );
    case "ling3":
      return think("<role>ASSISTANT</role>\n", "<think>", "</think>");
    case "cohere2moe":
      return think(
        "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
        "<|START_THINKING|>",
        "<|END_THINKING|>",
        "<|START_TEXT|>",
      );
    case "lfm2":
      return think("<|im_start|>assistant\n", "<think>", "</think>");
    case "gigachat-v3":
      return "assistant<|role_sep|>\n" + (content ?? "");
    case "minimax-m3":
      return think(c.generationPrompt(), "<mm:think>", "</mm:think>");
    case "deepseek-v3.2": {
      const v4 = !c.src.includes("function_calls");
      if (v4 && reasoning === "") return "<｜Assistant｜></think>" + (content ?? "");
      return think("<｜Assistant｜>", "<think>", "</think>");
    }
    case "gemma4":
      return think(
        c.prompt.endsWith("<turn|>\n") ? "<|turn>model\n" : "",
        "<|channel>thought\n",
        "<channel|>",
      );
    case "minicpm5":
      return think("<|im_start|>assistant\n", "<think>\n", "\n</think>\n\n");
    case "qwen3-coder": {
      let out = "<|im_start|>assistant\n";
      if (c.src.includes("<think>")) {
        out += "<think>\n" + reasoning;
        if (content !== undefined) out += "\n</think>\n\n";
      }
      return out + (content ?? "");
    }
  }
}

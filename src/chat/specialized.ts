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

/** DeepSeek V4: each run of tool results ordered as the calls before it were. */
function sortToolResults(messages: Message[]): Message[] {
  const out = [...messages];
  let order: string[] = [];
  for (let i = 0; i < out.length; i++) {
    const m = out[i];
    if (m.role === "assistant" && Array.isArray(m.tool_calls)) {
      order = (m.tool_calls as Message[]).map((c) => String(c.id ?? ""));
      continue;
    }
    if (m.role !== "tool") continue;
    let end = i;
    while (end < out.length && out[end].role === "tool") end++;
    const run = out.slice(i, end);
    const rank = (t: Message) => {
      const at = order.indexOf(String(t.tool_call_id ?? ""));
      return at < 0 ? order.length : at;
    };
    const sorted = run.map((t, k) => [t, k] as const).sort((a, b) =>
      rank(a[0]) - rank(b[0]) || a[1] - b[1]
    ).map(([t]) => t);
    out.splice(i, run.length, ...sorted);
    i = end - 1;
  }
  return out;
}

/** The messages `name`'s handler renders. */
export function prepareForHandler(
  src: string,
  messages: Message[],
): { name: HandlerName; messages: Message[] } {
  const name = handlerOf(src);
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

/**
 * Chat templates rendered as llama.cpp renders them (`llama-server --jinja`,
 * `common_chat_templates_apply`): the model's Jinja `tokenizer.chat_template`
 * run by a port of llama.cpp's own Jinja engine (`./jinja/`) with the
 * inputs llama.cpp prepares (`messages` as `to_json_oaicompat` shapes them,
 * `tools`, `add_generation_prompt`, `bos_token`, `eos_token`,
 * `enable_thinking`, `date_string`, `datetime`, `chat_template_kwargs`, and
 * the caps-driven workarounds), and llama.cpp's handling around it:
 *
 * - a BOS the template prints is dropped when the vocabulary adds one itself
 *   (likewise a trailing EOS when it adds EOS);
 * - a system message is folded into the first user turn (joined by a newline)
 *   for templates that do not use the system role;
 * - a final assistant message is continued: the conversation before it is
 *   rendered without the generation prompt, then the generation prompt (what
 *   `add_generation_prompt` adds), the empty reasoning block of thinking
 *   templates, and the message's text, with no end of turn.
 *
 * @example
 * ```ts
 * import { ChatTemplate } from "./template.ts";
 * const chatml = ChatTemplate.builtin("chatml", { bosToken: "", eosToken: "<|im_end|>" });
 * const prompt = chatml.render([{ role: "user", content: "Hi" }]);
 * if (prompt !== "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") throw new Error(prompt);
 * ```
 *
 * @module
 */
import { BUILTIN_TEMPLATES, type BuiltinTemplateName, isBuiltinTemplateName } from "./builtins.ts";
import {
  applyPreserveReasoning,
  applyReasoningEffort,
  type Caps,
  capsOf,
  Context,
  fromJson,
  JinjaError,
  parse,
  render as renderProgram,
} from "./jinja/mod.ts";
import {
  ChatInputError,
  type ChatMessage,
  type ChatTool,
  foldSystemMessage,
  mapDeveloperToSystem,
  messageToJson,
  normalizeContent,
  type ParsedMessage,
  parseMessages,
  parseToolArguments,
  renderContent,
  toolsToJson,
} from "./messages.ts";
import {
  continuationOf,
  type HandlerName,
  handlerOf,
  handlerSupportsThinking,
  prepareForHandler,
} from "./specialized.ts";
import { strftime } from "./strftime.ts";

export {
  ChatInputError,
  type ChatMessage,
  type ChatTool,
  type ContentPart,
  type ToolCall,
} from "./messages.ts";

/**
 * A template that cannot be compiled or rendered (a Jinja error or
 * `raise_exception`). `templateMessage` is the template's own text (for
 * `raise_exception`, what it raised); `trace` is llama.cpp's source excerpt.
 */
export class ChatTemplateError extends Error {
  /** The innermost error: `Jinja Exception: <text>` for `raise_exception`, else the engine's message. */
  readonly templateMessage: string;
  /** llama.cpp's "While executing … in source" excerpt and error, when the template ran. */
  readonly trace: string;
  constructor(
    message: string,
    options?: ErrorOptions & { templateMessage?: string; trace?: string },
  ) {
    super(message, options);
    this.name = "ChatTemplateError";
    this.templateMessage = options?.templateMessage ?? message;
    this.trace = options?.trace ?? "";
  }
}

/** The special-token texts and BOS/EOS rules of the vocabulary a template renders for. */
export interface ChatTemplateTokens {
  /** The BOS token's text (`bos_token`); "" when the vocabulary has none. */
  bosToken: string;
  /** The EOS token's text (`eos_token`); "" when the vocabulary has none. */
  eosToken: string;
  /** The tokenizer adds BOS itself: a BOS the template prints first is dropped. */
  addBos?: boolean;
  /** The tokenizer adds EOS itself: an EOS the template prints last is dropped. */
  addEos?: boolean;
}

/** Options of {@linkcode ChatTemplate.render}. */
export interface RenderOptions {
  /** End with the assistant's turn opened (default true); ignored when the last message is the assistant's. */
  addGenerationPrompt?: boolean;
  /** The clock `strftime_now`, `date_string` and `datetime` read; default now. */
  now?: Date;
  /**
   * The template's `enable_thinking` (default true). False asks a reasoning
   * template to close its reasoning block in the generation prompt, so the
   * reply starts with the answer (the server does so for structured output).
   * `chatTemplateKwargs.enable_thinking` (a boolean) overrides it.
   */
  enableThinking?: boolean;
  /** OpenAI `tools` (function tools), passed to the template as `tools`. */
  tools?: readonly ChatTool[];
  /** Extra template variables (`chat_template_kwargs`), e.g. `{enable_thinking: false}`. */
  chatTemplateKwargs?: Readonly<Record<string, unknown>>;
  /**
   * llama-server's `reasoning_effort`: `"none"` turns thinking off; another
   * value reaches the template as `reasoning_effort` (and `reasoning_strength`).
   */
  reasoningEffort?: string;
  /**
   * llama-server's `continue_final_message`: the last message is continued,
   * its content (`"content"`), its reasoning (`"reasoning_content"`), or
   * whichever it has (`true`: the reasoning when it has no content). Asks for
   * `addGenerationPrompt: false`.
   */
  continueFinalMessage?: boolean | "content" | "reasoning_content";
  /**
   * Continue a final assistant message unasked (default true, llama-server's
   * default; its `--no-prefill-assistant` is false).
   */
  prefillAssistant?: boolean;
}

/** The message-shaped values a render hands the template. */
type TemplateMessage = Record<string, unknown>;

/** What one template run receives besides the messages. */
interface ApplyInputs {
  tools: Record<string, unknown>[];
  enableThinking: boolean;
  extra: Record<string, unknown>;
  now: Date;
}

/** Markers the differential analysis of llama.cpp's autoparser finds around reasoning. */
interface ReasoningMarkers {
  start: string;
  end: string;
}

// The probe texts of llama.cpp's differential template analysis (chat-diff-analyzer.cpp).
const USER_PROBE = "U_USER_MSG Hello END_U";
const ASSISTANT_PROBE = "A_ASST_MSG I can help END_A";
const THINKING_PROBE = "REASON_PART I am thinking END_R";
/** The two tools of llama.cpp's analysis probes. */
const ANALYSIS_TOOLS = ["FFF_FIRST_FUN_F", "SSS_SECOND_FUN_S"].map((name, i) => ({
  type: "function",
  function: {
    name,
    description: i === 0 ? "Test function foo" : "Test function bar",
    parameters: {
      type: "object",
      properties: {
        AA_ARG_FST_AA: { type: "string", description: "First argument" },
        BB_ARG_SND_BB: { type: "string", description: "Second argument" },
      },
      required: [],
    },
  },
}));

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** How many characters of one output's tail llama.cpp looks for in the other. */
const ANCHOR_LENGTH = 64;
/** A `<...>` or `[...]` marker, as llama.cpp's PEG `marker()`. */
const MARKER = String.raw`(?:<[^>]*>|\[[^\]]*\])`;

/** No content, parts, calls, reasoning, name or call id (llama.cpp's `common_chat_msg::empty`). */
function isEmptyMessage(m: ParsedMessage): boolean {
  return m.content === "" && m.contentParts.length === 0 && m.toolCalls.length === 0 &&
    m.reasoningContent === "" && m.toolName === "" && m.toolCallId === "";
}

/** `s` without leading and trailing ASCII whitespace (C's `isspace`, llama.cpp's `trim_whitespace`). */
function trimSpace(s: string): string {
  return s.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, "");
}

/** The whitespace-separated marker segments of `text` (llama.cpp's `segmentize_markers`, whitespace pruned). */
function markerSegments(text: string): { marker: boolean; value: string }[] {
  const out: { marker: boolean; value: string }[] = [];
  for (const m of text.matchAll(new RegExp(`${MARKER}|[^<\\[]+|[<\\[]`, "g"))) {
    const value = m[0];
    const marker = new RegExp(`^${MARKER}$`).test(value);
    if (!marker && trimSpace(value) === "") continue;
    out.push({ marker, value: marker ? value : trimSpace(value) });
  }
  return out;
}

/** The part of `a` and of `b` between their common prefix and common suffix. */
function diff(a: string, b: string): { left: string; right: string } {
  let p = 0;
  while (p < a.length && p < b.length && a[p] === b[p]) p++;
  let s = 0;
  while (s < a.length - p && s < b.length - p && a[a.length - 1 - s] === b[b.length - 1 - s]) s++;
  return { left: a.slice(p, a.length - s), right: b.slice(p, b.length - s) };
}

/** A compiled chat template for one vocabulary. */
export class ChatTemplate {
  /** The Jinja source. */
  readonly source: string;
  readonly #tokens: Required<ChatTemplateTokens>;
  readonly #program: ReturnType<typeof parse>;
  #caps?: Caps;
  #handler?: HandlerName;
  #reasoning?: ReasoningMarkers | null;

  /** Compiles `source`; throws {@linkcode ChatTemplateError} when it is not valid Jinja. */
  constructor(source: string, tokens: ChatTemplateTokens) {
    this.source = source;
    this.#tokens = { addBos: false, addEos: false, ...tokens };
    try {
      this.#program = parse(patchSource(source));
    } catch (error) {
      throw new ChatTemplateError(`the chat template does not compile: ${messageOf(error)}`, {
        cause: error,
      });
    }
  }

  /** The built-in template `name` (see {@linkcode BUILTIN_TEMPLATES}). */
  static builtin(name: BuiltinTemplateName, tokens: ChatTemplateTokens): ChatTemplate {
    return new ChatTemplate(BUILTIN_TEMPLATES[name], tokens);
  }

  /**
   * A template from what the user gave: a built-in's name, else the Jinja
   * source itself.
   */
  static fromSpec(spec: string, tokens: ChatTemplateTokens): ChatTemplate {
    return isBuiltinTemplateName(spec)
      ? ChatTemplate.builtin(spec, tokens)
      : new ChatTemplate(spec, tokens);
  }

  /** The family whose dedicated llama.cpp handler renders this template ("" for the autoparser). */
  get #handlerName(): HandlerName {
    return this.#handler ??= handlerOf(this.#program.source);
  }

  /** What the template supports, probed as llama.cpp probes it. */
  get caps(): Caps {
    return this.#caps ??= capsOf(this.#program);
  }

  /**
   * Whether the template thinks (llama-server's default `enable_thinking`):
   * its family's handler says so, or the autoparser finds reasoning markers.
   */
  get supportsThinking(): boolean {
    return handlerSupportsThinking(this.#handlerName, this.#program.source) ??
      this.#reasoningMarkers() !== null;
  }

  /** Whether the template uses a system message's content (llama.cpp's `supports_system_role` cap). */
  get supportsSystemRole(): boolean {
    return this.caps.supportsSystemRole;
  }

  /**
   * Renders `messages` as llama-server's `/apply-template` does. Throws
   * {@linkcode ChatInputError} for malformed messages or tools and
   * {@linkcode ChatTemplateError} when the template fails (a Jinja error, or
   * its own `raise_exception`).
   */
  render(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    const now = options.now ?? new Date();
    const src = this.#program.source;
    const tools = toolsToJson(options.tools);
    const parsed = parseMessages(messages);
    let addGenerationPrompt = options.addGenerationPrompt ?? true;
    // llama-server's continuation rules (oaicompat_chat_params_parse).
    const cfm = options.continueFinalMessage;
    let continuation: "none" | "auto" | "content" | "reasoning" = cfm === true
      ? "auto"
      : cfm === "content"
      ? "content"
      : cfm === "reasoning_content"
      ? "reasoning"
      : "none";
    const last = parsed[parsed.length - 1];
    if (
      continuation === "none" && (options.prefillAssistant ?? true) && last?.role === "assistant"
    ) {
      if (parsed.length >= 2 && parsed[parsed.length - 2].role === "assistant") {
        throw new ChatInputError(
          "Cannot have 2 or more assistant messages at the end of the list.",
        );
      }
      continuation = "auto";
      addGenerationPrompt = false;
    }
    if (continuation !== "none" && addGenerationPrompt) {
      throw new ChatInputError(
        "Cannot set both add_generation_prompt and continue_final_message to true.",
      );
    }
    if (continuation !== "none" && last?.role === "assistant" && last.toolCalls.length > 0) {
      throw new ChatInputError("Cannot continue an assistant message that contains tool calls.");
    }
    const continued = continuation !== "none" ? last : undefined;
    if (continued !== undefined && continuation === "auto") {
      continuation = continued.reasoningContent !== "" && continued.content === "" &&
          continued.contentParts.length === 0
        ? "reasoning"
        : "content";
    }
    const caps = this.caps;
    let toRender = parsed;
    if (src.includes("You have access to the following functions in JSONSchema format")) {
      toRender = parsed.map((m) => ({
        ...m,
        content: trimSpace(m.content),
        reasoningContent: trimSpace(m.reasoningContent),
        contentParts: m.contentParts.map((p) =>
          p.type === "text" ? { ...p, text: trimSpace(p.text) } : p
        ),
      }));
    }
    let msgs = normalizeContent(toRender.map(messageToJson), caps);
    if (continued !== undefined) msgs = msgs.slice(0, -1);
    if (!src.includes("<|channel|>")) mapDeveloperToSystem(msgs);
    if (!caps.supportsSystemRole) msgs = foldSystemMessage(msgs);
    if (caps.supportsToolCalls) {
      for (const m of msgs) if (m.tool_calls !== undefined && !("content" in m)) m.content = "";
    }
    if (caps.supportsObjectArguments) parseToolArguments(msgs);
    const kwargs: Record<string, unknown> = { ...options.chatTemplateKwargs };
    let enableThinking = options.enableThinking ?? this.supportsThinking;
    if (kwargs.enable_thinking === true || kwargs.enable_thinking === false) {
      enableThinking = kwargs.enable_thinking;
    } else if (typeof kwargs.enable_thinking === "string") {
      throw new ChatInputError('invalid type for "enable_thinking" (expected boolean, got string)');
    }
    if (options.reasoningEffort === "none") {
      enableThinking = false;
      delete kwargs.reasoning_effort;
    } else if (options.reasoningEffort !== undefined && options.reasoningEffort !== "") {
      kwargs.reasoning_effort = options.reasoningEffort;
    }
    // llama-server's default kwargs carry preserve_reasoning: true.
    const extra: Record<string, unknown> = {
      datetime: strftime(now, "%b %d %Y"),
      date_string: strftime(now, "%d %b %Y"),
      preserve_reasoning: true,
      ...kwargs,
    };
    const inputs: ApplyInputs = { tools, enableThinking, extra, now };
    const handler = prepareForHandler(this.#handlerName, src, msgs);
    msgs = handler.messages;
    let prompt = this.#apply(msgs, addGenerationPrompt, inputs);
    if (handler.name === "gpt-oss" && !addGenerationPrompt) {
      const at = prompt.lastIndexOf("<|return|>");
      if (at >= 0) {
        prompt = prompt.slice(0, at) + "<|end|>" + prompt.slice(at + "<|return|>".length);
      }
    }
    if (handler.name === "gemma4" && addGenerationPrompt && prompt.endsWith("<turn|>\n")) {
      prompt += "<|turn>model\n";
    }
    // llama.cpp appends nothing for an empty message (`common_chat_msg::empty`).
    if (continued === undefined || isEmptyMessage(continued)) return prompt;
    const mode = continuation;
    const content = renderContent(continued);
    const own = continuationOf(handler.name, {
      src,
      prompt,
      reasoning: continued.reasoningContent,
      content: mode === "content" ? content : undefined,
      generationPrompt: () => this.#generationPrompt(msgs, inputs),
    });
    if (own !== undefined) return prompt + own;
    let generation = this.#generationPrompt(msgs, inputs);
    const reasoning = this.#reasoningMarkers();
    if (reasoning !== null && reasoning.start !== "") {
      const at = generation.indexOf(reasoning.start);
      if (at >= 0) generation = generation.slice(0, at);
      generation += reasoning.start + continued.reasoningContent;
      if (mode === "content") generation += reasoning.end;
    }
    if (mode === "content") generation += content;
    return prompt + generation;
  }

  /** What `add_generation_prompt` adds: the true render past its common prefix with the false one. */
  #generationPrompt(msgs: TemplateMessage[], inputs: ApplyInputs): string {
    const without = this.#apply(msgs, false, inputs);
    const withPrompt = this.#apply(msgs, true, inputs);
    let p = 0;
    while (p < without.length && p < withPrompt.length && without[p] === withPrompt[p]) p++;
    return withPrompt.slice(p);
  }

  /**
   * The reasoning start/end markers, found as llama.cpp's autoparser finds
   * them: a probe assistant message rendered with and without reasoning, then
   * with thinking off and on, then its per-template patches.
   */
  #reasoningMarkers(): ReasoningMarkers | null {
    if (this.#reasoning !== undefined) return this.#reasoning;
    let start = "";
    let end = "";
    const now = new Date();
    const user = { role: "user", content: USER_PROBE };
    const tryApply = (
      msgs: TemplateMessage[],
      agp: boolean,
      thinking = true,
      tools: Record<string, unknown>[] = [],
    ) => {
      try {
        return this.#probe(msgs, agp, now, thinking, tools);
      } catch {
        return undefined;
      }
    };
    // 1. Reasoning presence.
    const plain = tryApply([user, { role: "assistant", content: ASSISTANT_PROBE }], false);
    const withReasoning = tryApply([user, {
      role: "assistant",
      content: ASSISTANT_PROBE,
      reasoning_content: THINKING_PROBE,
    }], false);
    if (plain !== undefined && withReasoning !== undefined) {
      const d = diff(plain, withReasoning);
      const at = withReasoning.indexOf(THINKING_PROBE);
      if (d.right !== "" && d.right.includes(THINKING_PROBE) && at >= 0) {
        const before = withReasoning.slice(0, at);
        const after = withReasoning.slice(at + THINKING_PROBE.length);
        const pre = new RegExp(`${MARKER}\\s*$`).exec(before);
        const post = new RegExp(`^\\s*${MARKER}\\s*`).exec(after);
        if (pre !== null && post !== null) {
          start = pre[0];
          end = post[0];
        } else {
          const delimiter = new RegExp(`^\\s*(${MARKER}\\s*)`).exec(after);
          if (delimiter !== null) end = delimiter[1];
        }
      }
    }
    // 2. Thinking off versus on.
    const off = tryApply([user], true, false);
    const on = tryApply([user], true, true);
    if (off !== undefined && on !== undefined) {
      const d = diff(off, on);
      const left = trimSpace(d.left);
      const right = trimSpace(d.right);
      if (left === "" && d.right !== "") {
        if (right !== "" && on.endsWith(right) && start === "") start = d.right;
      } else if (right === "" && d.left !== "") {
        if (left !== "" && off.endsWith(left) && end === "") {
          const seg = markerSegments(off);
          if (seg.length >= 2 && seg[seg.length - 1].value === left && seg[seg.length - 2].marker) {
            start = seg[seg.length - 2].value;
          }
          end = d.left;
        }
      } else if (left !== "" && right !== "") {
        for (const [base, extended] of [[on, off], [off, on]]) {
          const anchor = base.slice(base.length - Math.min(base.length, ANCHOR_LENGTH));
          const pos = extended.lastIndexOf(anchor);
          if (pos < 0 || pos + anchor.length >= extended.length) continue;
          const extra = trimSpace(extended.slice(pos + anchor.length));
          if (extra === "") continue;
          const seg = markerSegments(extra);
          if (seg.length === 2 && seg[0].marker && seg[1].marker) {
            if (start === "") start = seg[0].value;
            if (end === "") end = seg[1].value;
            break;
          }
        }
      }
    }
    // 3. Reasoning shown only beside tool calls (llama.cpp's TOOLS_ONLY mode).
    if (this.caps.supportsToolCalls) {
      const withoutCall = tryApply(
        [user, {
          role: "assistant",
          content: ASSISTANT_PROBE,
          reasoning_content: THINKING_PROBE,
        }],
        false,
        true,
        ANALYSIS_TOOLS,
      );
      const withCall = tryApply(
        [user, {
          role: "assistant",
          content: null,
          reasoning_content: THINKING_PROBE,
          tool_calls: [{
            id: "call00001",
            type: "function",
            function: {
              name: "FFF_FIRST_FUN_F",
              arguments: { AA_ARG_FST_AA: "VVVV", BB_ARG_SND_BB: "XXXX" },
            },
          }],
        }],
        false,
        true,
        ANALYSIS_TOOLS,
      );
      if (
        withoutCall !== undefined && withCall !== undefined &&
        !withoutCall.includes(THINKING_PROBE) && withCall.includes(THINKING_PROBE)
      ) {
        const probe = escapeRegExp(THINKING_PROBE);
        const wrapped = new RegExp(`(${MARKER}\\s*)${probe}\\s*(${MARKER}\\s*)`).exec(withCall);
        if (wrapped !== null) [start, end] = [wrapped[1], wrapped[2]];
        else {
          const delimiter = new RegExp(`${probe}\\s*(${MARKER}\\s*)?`).exec(withCall);
          end = delimiter?.[1] ?? end;
        }
      }
    }
    // 4. llama.cpp's patches for templates the analysis misreads.
    const src = this.source;
    if (
      start === "" && end === "" && src.includes("content.split('</think>')") &&
      !src.includes("reasoning_content") && !src.includes("<SPECIAL_12>")
    ) {
      [start, end] = ["<think>", "</think>"];
    }
    if (
      src.includes(
        "Write your thoughts between <think></think> and write your response between <response></response>",
      )
    ) {
      [start, end] = ["<think>", "</think>"];
    }
    if (
      src.includes("<SPECIAL_10>") && src.includes("<SPECIAL_11>") &&
      src.includes("<SPECIAL_12>") &&
      src.includes("<TOOL_RESPONSE>")
    ) {
      [start, end] = ["<think>\n", "</think>"];
    }
    if (src.includes("laguna_glm_thinking")) [start, end] = [trimSpace(start), trimSpace(end)];
    this.#reasoning = start === "" && end === "" ? null : { start, end };
    return this.#reasoning;
  }

  /** The probe runs of the reasoning analysis (llama.cpp's `apply_template`: content normalized, no date). */
  #probe(
    msgs: TemplateMessage[],
    addGenerationPrompt: boolean,
    now: Date,
    thinking = true,
    tools: Record<string, unknown>[] = [],
  ): string {
    return this.#apply(normalizeContent(msgs, this.caps), addGenerationPrompt, {
      tools,
      enableThinking: thinking,
      extra: {},
      now,
    });
  }

  /** One template run (llama.cpp's `common_chat_template_direct_apply`), BOS/EOS dropped as the vocabulary asks. */
  #apply(msgs: TemplateMessage[], addGenerationPrompt: boolean, inputs: ApplyInputs): string {
    const ctx = new Context(this.#program.source);
    ctx.now = inputs.now;
    const globals: Record<string, unknown> = {
      messages: msgs,
      bos_token: this.#tokens.bosToken,
      eos_token: this.#tokens.eosToken,
      enable_thinking: inputs.enableThinking,
    };
    if (inputs.tools.length > 0) globals.tools = inputs.tools;
    Object.assign(globals, inputs.extra);
    if (addGenerationPrompt) globals.add_generation_prompt = true;
    if (typeof globals.preserve_reasoning === "boolean") {
      applyPreserveReasoning(ctx, globals.preserve_reasoning);
    }
    if (typeof globals.reasoning_effort === "string" && globals.reasoning_effort !== "") {
      applyReasoningEffort(ctx, globals.reasoning_effort);
    }
    for (const [key, value] of Object.entries(globals)) ctx.set(key, fromJson(value));
    let result: string;
    try {
      result = renderProgram(this.#program, ctx);
    } catch (error) {
      if (!(error instanceof JinjaError)) throw error;
      const prefix = error.raised && error.reason.startsWith("Jinja Exception: ")
        ? "the chat template raised an exception: " + error.reason.slice("Jinja Exception: ".length)
        : "the chat template failed to render: " + error.reason;
      throw new ChatTemplateError(prefix, {
        cause: error,
        templateMessage: error.reason,
        trace: error.message,
      });
    }
    const { bosToken, eosToken, addBos, addEos } = this.#tokens;
    if (addBos && result.startsWith(bosToken)) result = result.slice(bosToken.length);
    if (addEos && result.endsWith(eosToken)) {
      result = result.slice(0, result.length - eosToken.length);
    }
    return result;
  }
}

/** llama.cpp's source patches for two templates that raise on their own examples. */
function patchSource(source: string): string {
  let src = source;
  if (src.includes("<|channel|>") && src.includes("in message.content or")) {
    src = src.replaceAll(
      '{%- if "<|channel|>analysis<|message|>" in message.content or ' +
        '"<|channel|>final<|message|>" in message.content %}',
      "{%- if false %}",
    );
  }
  if (src.includes("[TOOL_CALLS]") && src.includes("if (message['content'] is none or")) {
    src = src.replaceAll(
      "{%- if (message['content'] is none or message['content'] == '' or " +
        "message['content']|length == 0) and (message['tool_calls'] is not defined or " +
        "message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
      "{%- if false %}",
    );
  }
  return src;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export { type BuiltinTemplateName, isBuiltinTemplateName };

/**
 * Chat templates rendered as llama.cpp renders them (`llama-server --jinja`,
 * `common_chat_templates_apply`): the model's Jinja `tokenizer.chat_template`
 * run by `@huggingface/jinja` with the variables llama.cpp passes
 * (`messages`, `add_generation_prompt`, `bos_token`, `eos_token`,
 * `enable_thinking`, `date_string`, `datetime`, `strftime_now`,
 * `raise_exception`; no `tools`), and llama.cpp's handling around it:
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
import { Environment, Interpreter, type Program, Template } from "./_jinja.ts";
import { BUILTIN_TEMPLATES, type BuiltinTemplateName, isBuiltinTemplateName } from "./builtins.ts";
import { strftime } from "./strftime.ts";

/** One message of a conversation, as OpenAI's API spells it. */
export interface ChatMessage {
  /** `"system"`, `"user"` or `"assistant"` (`"developer"` is read as `"system"`). */
  role: string;
  /** The message's text. */
  content: string;
}

/** A template that cannot be compiled or rendered (a Jinja error or `raise_exception`). */
export class ChatTemplateError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ChatTemplateError";
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
   */
  enableThinking?: boolean;
}

/** The message-shaped values a render hands the template. */
interface TemplateMessage {
  role: string;
  content: string;
  reasoning_content?: string;
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
const SYSTEM_PROBE = "S_SYSTEM_MSG dotllm END_S";
/** How many characters of one output's tail llama.cpp looks for in the other. */
const ANCHOR_LENGTH = 64;
/** A `<...>` or `[...]` marker, as llama.cpp's PEG `marker()`. */
const MARKER = String.raw`(?:<[^>]*>|\[[^\]]*\])`;

function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new ChatTemplateError("range() step must not be zero");
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/** The whitespace-separated marker segments of `text` (llama.cpp's `segmentize_markers`, whitespace pruned). */
function markerSegments(text: string): { marker: boolean; value: string }[] {
  const out: { marker: boolean; value: string }[] = [];
  for (const m of text.matchAll(new RegExp(`${MARKER}|[^<\\[]+|[<\\[]`, "g"))) {
    const value = m[0];
    const marker = new RegExp(`^${MARKER}$`).test(value);
    if (!marker && value.trim() === "") continue;
    out.push({ marker, value: marker ? value : value.trim() });
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
  readonly #program: Program;
  #systemRole?: boolean;
  #reasoning?: ReasoningMarkers | null;

  /** Compiles `source`; throws {@linkcode ChatTemplateError} when it is not valid Jinja. */
  constructor(source: string, tokens: ChatTemplateTokens) {
    this.source = source;
    this.#tokens = { addBos: false, addEos: false, ...tokens };
    try {
      this.#program = new Template(source).parsed;
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

  /**
   * Renders `messages` as llama.cpp does. Throws {@linkcode ChatTemplateError}
   * when the template fails (a Jinja error, or its own `raise_exception`).
   */
  render(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    const now = options.now ?? new Date();
    let addGenerationPrompt = options.addGenerationPrompt ?? true;
    let msgs: TemplateMessage[] = messages.map((m, i) => {
      if (typeof m?.role !== "string" || typeof m.content !== "string") {
        throw new TypeError(`message ${i} needs a string role and a string content`);
      }
      return { role: m.role === "developer" ? "system" : m.role, content: m.content };
    });
    // llama-server continues a final assistant message (its `prefill_assistant` default).
    let continued: TemplateMessage | undefined;
    if (msgs.length > 0 && msgs[msgs.length - 1].role === "assistant") {
      if (msgs.length >= 2 && msgs[msgs.length - 2].role === "assistant") {
        throw new ChatTemplateError("cannot continue after two assistant messages in a row");
      }
      continued = msgs[msgs.length - 1];
      msgs = msgs.slice(0, -1);
      addGenerationPrompt = false;
    }
    if (!this.supportsSystemRole && msgs.length > 0 && msgs[0].role === "system") {
      msgs = msgs.length > 1
        ? [{ ...msgs[1], content: `${msgs[0].content}\n${msgs[1].content}` }, ...msgs.slice(2)]
        : [];
    }
    let prompt = this.#apply(msgs, addGenerationPrompt, now, options.enableThinking ?? true);
    if (this.#isGemma4 && addGenerationPrompt && prompt.endsWith("<turn|>\n")) {
      prompt += "<|turn>model\n";
    }
    if (continued === undefined) return prompt;
    let generation: string;
    if (this.#isGemma4) {
      // llama.cpp's dedicated Gemma 4 handler (common/parsers/gemma4.cpp).
      generation = (prompt.endsWith("<turn|>\n") ? "<|turn>model\n" : "") +
        "<|channel>thought\n<channel|>";
    } else {
      generation = this.#generationPrompt(msgs, now);
      const reasoning = this.#reasoningMarkers();
      if (reasoning !== null && reasoning.start !== "") {
        const at = generation.indexOf(reasoning.start);
        if (at >= 0) generation = generation.slice(0, at);
        generation += reasoning.start + reasoning.end;
      }
    }
    return prompt + generation + continued.content;
  }

  /** Whether the template uses a system message's content (llama.cpp's `supports_system_role` cap). */
  get supportsSystemRole(): boolean {
    if (this.#systemRole === undefined) {
      try {
        const probe = [
          { role: "system", content: SYSTEM_PROBE },
          { role: "user", content: USER_PROBE },
        ];
        this.#systemRole = this.#apply(probe, false, new Date()).includes(SYSTEM_PROBE);
      } catch {
        this.#systemRole = false;
      }
    }
    return this.#systemRole;
  }

  get #isGemma4(): boolean {
    return this.source.includes("'<|tool_call>call:'");
  }

  /** What `add_generation_prompt` adds: the true render past its common prefix with the false one. */
  #generationPrompt(msgs: TemplateMessage[], now: Date): string {
    const without = this.#apply(msgs, false, now);
    const withPrompt = this.#apply(msgs, true, now);
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
    const tryApply = (msgs: TemplateMessage[], agp: boolean, thinking = true) => {
      try {
        return this.#apply(msgs, agp, now, thinking);
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
      const left = d.left.trim();
      const right = d.right.trim();
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
          const extra = extended.slice(pos + anchor.length).trim();
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
    // 3. llama.cpp's patches for templates the analysis misreads.
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
    this.#reasoning = start === "" && end === "" ? null : { start, end };
    return this.#reasoning;
  }

  /** One template run (llama.cpp's `common_chat_template_direct_apply`), BOS/EOS dropped as the vocabulary asks. */
  #apply(
    msgs: TemplateMessage[],
    addGenerationPrompt: boolean,
    now: Date,
    thinking = true,
  ): string {
    const env = new Environment();
    const globals: Record<string, unknown> = {
      false: false,
      true: true,
      none: null,
      False: false,
      True: true,
      None: null,
      range,
      raise_exception: (message: unknown) => {
        throw new ChatTemplateError(`the chat template raised an exception: ${message}`);
      },
      strftime_now: (format: unknown) => strftime(now, String(format)),
      messages: msgs,
      bos_token: this.#tokens.bosToken,
      eos_token: this.#tokens.eosToken,
      enable_thinking: thinking,
      datetime: strftime(now, "%b %d %Y"),
      date_string: strftime(now, "%d %b %Y"),
    };
    if (addGenerationPrompt) globals.add_generation_prompt = true;
    for (const [key, value] of Object.entries(globals)) env.set(key, value);
    let result: string;
    try {
      result = String(new Interpreter(env).run(this.#program).value);
    } catch (error) {
      if (error instanceof ChatTemplateError) throw error;
      throw new ChatTemplateError(`the chat template failed to render: ${messageOf(error)}`, {
        cause: error,
      });
    }
    const { bosToken, eosToken, addBos, addEos } = this.#tokens;
    if (addBos && bosToken !== "" && result.startsWith(bosToken)) {
      result = result.slice(bosToken.length);
    }
    if (addEos && eosToken !== "" && result.endsWith(eosToken)) {
      result = result.slice(0, -eosToken.length);
    }
    return result;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export { type BuiltinTemplateName, isBuiltinTemplateName };

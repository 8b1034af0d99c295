/**
 * The reasoning block split off generated text, as llama-server's default
 * `--reasoning-format` (`auto`, the same as `deepseek`) splits it: a leading
 * `<think>…</think>` (or the format's tags) goes to `reasoning_content`, the rest is the
 * answer. A template whose generation prompt already opened the block (DeepSeek R1, QwQ,
 * Qwen 3 thinking) starts the text inside it. While streaming, text that may be the start
 * of a tag is held back.
 *
 * @example
 * ```ts
 * import { splitReasoning } from "./reasoning.ts";
 * const r = splitReasoning("I'm\nthinking</think>Hello", {
 *   start: "<think>", end: "</think>", generationPrompt: "<｜Assistant｜><think>\n",
 * });
 * // r.reasoning === "I'm\nthinking", r.rest === "Hello"
 * ```
 *
 * @module
 */
import type { ReasoningFormat } from "./types.ts";

/** The options of `splitReasoning`. */
export interface ReasoningSplitOptions {
  start: string;
  end: string;
  generationPrompt?: string;
  isPartial?: boolean;
  reasoningFormat?: ReasoningFormat;
  /** Texts that end the block without its end tag and stay in the rest (a tool call's marker). */
  endsBefore?: string[];
}

/** The length of the longest end of `text` that is a proper start of one of `markers`. */
export function partialMarkerLength(text: string, markers: readonly string[]): number {
  let best = 0;
  for (const m of markers) {
    for (let n = Math.min(m.length - 1, text.length); n > best; n--) {
      if (text.endsWith(m.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

/** True when the generation prompt leaves a reasoning block open (it ends inside one). */
export function promptOpensReasoning(
  generationPrompt: string,
  start: string,
  end: string,
): boolean {
  if (start === "") return false;
  const at = generationPrompt.lastIndexOf(start);
  return at >= 0 && generationPrompt.indexOf(end, at + start.length) < 0 &&
    generationPrompt.slice(at + start.length).trim() === "";
}

function isSpace(c: string): boolean {
  return c === " " || c === "\n" || c === "\r" || c === "\t";
}

/**
 * The reasoning (see `kept`; "" when only whitespace) and the text after it. With reasoning
 * format `none`, nothing is split, and a block the prompt opened is given back to the
 * content with its opening tag (as llama.cpp does).
 */
export function splitReasoning(
  text: string,
  options: ReasoningSplitOptions,
): { reasoning: string; rest: string } {
  const { start, end } = options;
  const partial = options.isPartial ?? false;
  if (start === "" || end === "") return { reasoning: "", rest: text };
  const prompt = options.generationPrompt ?? "";
  const opened = promptOpensReasoning(prompt, start, end);
  if ((options.reasoningFormat ?? "auto") === "none") {
    return { reasoning: "", rest: opened ? prompt.slice(prompt.lastIndexOf(start)) + text : text };
  }
  let pos = 0;
  // A block the prompt opened: llama.cpp parses the prompt's text after the opening tag
  // (usually a newline) as the reasoning's start.
  if (opened) text = prompt.slice(prompt.lastIndexOf(start) + start.length) + text;
  else {
    while (pos < text.length && isSpace(text[pos])) pos++;
    if (text.startsWith(start, pos)) pos += start.length;
    else if (partial && pos < text.length && start.startsWith(text.slice(pos))) {
      return { reasoning: "", rest: "" };
    } else return { reasoning: "", rest: text };
  }
  // the block ends at its end tag (taken) or at text that ends it implicitly (kept: a call)
  const stops = options.endsBefore ?? [];
  let close = text.indexOf(end, pos);
  let after = close < 0 ? -1 : close + end.length;
  for (const s of stops) {
    const at = text.indexOf(s, pos);
    if (at >= 0 && (close < 0 || at < close)) {
      close = at;
      after = at;
    }
  }
  if (close < 0) {
    const held = partial ? partialMarkerLength(text, [end, ...stops]) : 0;
    return { reasoning: kept(text.slice(pos, text.length - held), opened), rest: "" };
  }
  while (after < text.length && isSpace(text[after])) after++;
  return { reasoning: kept(text.slice(pos, close), opened), rest: text.slice(after) };
}

/**
 * The reasoning text kept. A block the generation prompt opened is kept as
 * the model wrote it, its first newlines included, as llama-server returns
 * it (none when it is only whitespace: an empty `<think></think>`); a block
 * the model opened itself is trimmed (llama.cpp's tag-based parser takes the
 * whitespace around its tags).
 */
function kept(reasoning: string, opened: boolean): string {
  if (reasoning.trim() === "") return "";
  return opened ? reasoning : reasoning.trim();
}

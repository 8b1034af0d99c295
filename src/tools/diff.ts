/**
 * Streaming: the difference between two parses of a growing output as llama.cpp's
 * `common_chat_msg_diff::compute_diffs` gives it, and those differences as OpenAI chunk
 * deltas, so that concatenating the streamed deltas gives the final message. Also the
 * tool-call ids: kept per call index across parses (`ToolCallIds`), made as llama-server
 * makes them (random alphanumeric; 9 characters for Mistral's formats, which check them).
 *
 * @example
 * ```ts
 * import { computeDiffs, diffsToDeltas } from "./diff.ts";
 * const prev = { content: "Hel", reasoningContent: "", toolCalls: [] };
 * const next = { content: "Hello", reasoningContent: "", toolCalls: [] };
 * diffsToDeltas(computeDiffs(prev, next)); // [{ content: "lo" }]
 * ```
 *
 * @module
 */
import type { ParsedMessage, ToolCall, ToolFormatName } from "./types.ts";

/** One change (llama.cpp's `common_chat_msg_diff`). */
export interface MessageDiff {
  reasoningContentDelta: string;
  contentDelta: string;
  /** The call this diff extends or adds, -1 for none. */
  toolCallIndex: number;
  /** For a new call (or a changed name/id): the id and name; always the arguments' new text. */
  toolCallDelta: ToolCall;
}

/** An OpenAI `chat.completion.chunk` `choices[0].delta`. */
export interface ChunkDelta {
  content?: string;
  reasoning_content?: string;
  tool_calls?: {
    index: number;
    id?: string;
    type?: "function";
    function: { name?: string; arguments: string };
  }[];
}

/**
 * What `current` adds to `last`: "" when `current` is a prefix of `last` (a stop string was
 * cut) — and, where llama.cpp throws, when `current` does not extend `last` at all (what was
 * streamed cannot be taken back; the final message still has the whole text).
 */
function stringDiff(last: string, current: string): string {
  if (last === "") return current;
  if (current.startsWith(last)) return current.slice(last.length);
  return "";
}

/**
 * The changes from `prev` to `next` (each a later parse of the same growing text). Never
 * throws: where llama.cpp throws ("Invalid diff": fewer calls, a renamed call, text that does
 * not extend what was streamed), the change that cannot be streamed is left out.
 */
export function computeDiffs(prev: ParsedMessage, next: ParsedMessage): MessageDiff[] {
  const diffs: MessageDiff[] = [];
  const empty = (): MessageDiff => ({
    reasoningContentDelta: "",
    contentDelta: "",
    toolCallIndex: -1,
    toolCallDelta: { id: "", name: "", arguments: "" },
  });
  if (prev.reasoningContent !== next.reasoningContent) {
    diffs.push({
      ...empty(),
      reasoningContentDelta: stringDiff(prev.reasoningContent, next.reasoningContent),
    });
  }
  if (prev.content !== next.content) {
    diffs.push({ ...empty(), contentDelta: stringDiff(prev.content, next.content) });
  }
  if (next.toolCalls.length < prev.toolCalls.length) return diffs;
  if (prev.toolCalls.length > 0) {
    const idx = prev.toolCalls.length - 1;
    const p = prev.toolCalls[idx];
    const n = next.toolCalls[idx];
    if (p.name !== n.name && p.name !== "" && n.name !== "" && !n.name.startsWith(p.name)) {
      return diffs;
    }
    const args = stringDiff(p.arguments, n.arguments);
    if (args !== "" || p.id !== n.id || p.name !== n.name) {
      const d = empty();
      d.toolCallIndex = idx;
      if (p.id !== n.id || p.name !== n.name) {
        d.toolCallDelta.id = n.id;
        d.toolCallDelta.name = n.name;
      }
      d.toolCallDelta.arguments = args;
      diffs.push(d);
    }
  }
  for (let idx = prev.toolCalls.length; idx < next.toolCalls.length; idx++) {
    diffs.push({ ...empty(), toolCallIndex: idx, toolCallDelta: { ...next.toolCalls[idx] } });
  }
  return diffs;
}

/** The diffs as chunk deltas, one per diff, as llama-server streams them. */
export function diffsToDeltas(diffs: readonly MessageDiff[]): ChunkDelta[] {
  return diffs.map((d) => {
    if (d.reasoningContentDelta !== "") return { reasoning_content: d.reasoningContentDelta };
    if (d.contentDelta !== "") return { content: d.contentDelta };
    const call: NonNullable<ChunkDelta["tool_calls"]>[number] = {
      index: d.toolCallIndex,
      function: { arguments: d.toolCallDelta.arguments },
    };
    if (d.toolCallDelta.id !== "") call.id = d.toolCallDelta.id;
    if (d.toolCallDelta.name !== "") {
      call.type = "function";
      call.function.name = d.toolCallDelta.name;
    }
    return { tool_calls: [call] };
  });
}

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A random alphanumeric id of `length` characters. */
export function randomToolCallId(length = 32): string {
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  let id = "";
  for (const b of bytes) id += ALPHANUMERIC[b % ALPHANUMERIC.length];
  return id;
}

/** The id maker llama-server uses for a format (Mistral's templates require 9 characters). */
export function toolCallIdGenerator(format: ToolFormatName): () => string {
  const length = format === "mistral-nemo" || format === "mistral-small" ? 9 : 32;
  return () => randomToolCallId(length);
}

/**
 * Ids for the calls of one response, stable across parses of the growing text: a call
 * keeps the id its format wrote, else gets a generated one at its first appearance
 * (llama.cpp's `common_chat_msg::set_tool_call_ids`).
 */
export class ToolCallIds {
  readonly #ids: string[] = [];
  readonly #generate: () => string;

  constructor(generate: () => string = randomToolCallId) {
    this.#generate = generate;
  }

  /** `msg` with every call's id set (a new message; `msg` is not changed). */
  assign(msg: ParsedMessage): ParsedMessage {
    const toolCalls = msg.toolCalls.map((call, i) => {
      if (this.#ids.length <= i) this.#ids.push(call.id !== "" ? call.id : this.#generate());
      return { ...call, id: this.#ids[i] };
    });
    return { ...msg, toolCalls };
  }
}

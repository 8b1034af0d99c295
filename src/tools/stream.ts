/**
 * One response's output as it streams: the generated text so far, parsed again after each
 * piece (llama-server's `task_result_state::update_chat_msg`), the calls' ids kept across
 * parses, and the chunk deltas each piece adds. Written once for the server, `Llm.chat` and
 * `dotllm chat`.
 *
 * @example
 * ```ts
 * import { ChatOutputStream } from "./stream.ts";
 * import { detectToolFormat } from "./detect.ts";
 * const tools = [{ type: "function" as const, function: { name: "now", parameters: {} } }];
 * const out = new ChatOutputStream({ format: detectToolFormat("<tool_call>"), tools });
 * out.push("<tool_call>\n{\"name\": \"now\", ");
 * out.push("\"arguments\": {}}\n</tool_call>");
 * const { message } = out.finish();
 * if (message.toolCalls[0]?.name !== "now") throw new Error();
 * ```
 *
 * @module
 */
import {
  type ChunkDelta,
  computeDiffs,
  diffsToDeltas,
  toolCallIdGenerator,
  ToolCallIds,
} from "./diff.ts";
import { parseChatOutput, type ParseOptions } from "./parse.ts";
import type { ParsedMessage } from "./types.ts";

/** A streamed response's parse state. */
export class ChatOutputStream {
  readonly #options: ParseOptions;
  readonly #ids: ToolCallIds;
  #text = "";
  #message: ParsedMessage = { content: "", reasoningContent: "", toolCalls: [] };

  /**
   * `ids`: the call-id maker (default llama-server's for the format);
   * `echo`: text the reply starts with before the generated text (a
   * continued assistant message, which llama-server returns whole).
   */
  constructor(options: Omit<ParseOptions, "isPartial">, ids?: ToolCallIds, echo = "") {
    this.#options = options;
    this.#ids = ids ?? new ToolCallIds(toolCallIdGenerator(options.format.name));
    this.#text = echo;
  }

  /** The generated text so far. */
  get text(): string {
    return this.#text;
  }

  /** The message as last parsed. */
  get message(): ParsedMessage {
    return this.#message;
  }

  /** Adds generated text; returns the deltas it makes streamable (none while a call is half-read). */
  push(text: string): ChunkDelta[] {
    this.#text += text;
    return this.#update(true);
  }

  /** The final parse of the whole text, and the deltas not yet streamed. */
  finish(): { message: ParsedMessage; deltas: ChunkDelta[] } {
    const deltas = this.#update(false);
    return { message: this.#message, deltas };
  }

  #update(isPartial: boolean): ChunkDelta[] {
    const next = this.#ids.assign(parseChatOutput(this.#text, { ...this.#options, isPartial }));
    const deltas = diffsToDeltas(computeDiffs(this.#message, next));
    this.#message = next;
    return deltas;
  }
}

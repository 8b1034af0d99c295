/**
 * A decode-only tokenizer for tests of the generation loop: pieces from
 * `tokenizer.ggml.tokens` (`▁` → space, `<0xXX>` → that byte), UTF-8 joined
 * by a streaming TextDecoder. It does not encode; prompts are given as ids.
 *
 * @module
 */
import type { GenerationTokenizer } from "../src/generation/mod.ts";
import type { Gguf, GgufArray } from "../src/gguf/reader.ts";

export class PieceTokenizer implements GenerationTokenizer {
  readonly bos = 1;
  readonly #pieces: Uint8Array[];
  readonly #eog: Set<number>;

  constructor(gguf: Gguf, eog: Iterable<number> = [2]) {
    const tokens = (gguf.metadata.get("tokenizer.ggml.tokens") as GgufArray).strings();
    const encoder = new TextEncoder();
    this.#pieces = tokens.map((t) => {
      const byte = /^<0x([0-9A-F]{2})>$/.exec(t);
      return byte ? Uint8Array.of(parseInt(byte[1], 16)) : encoder.encode(t.replaceAll("▁", " "));
    });
    this.#eog = new Set(eog);
  }

  encode(): number[] {
    throw new Error("PieceTokenizer does not encode");
  }

  piece(id: number): string {
    return new TextDecoder().decode(this.#pieces[id]);
  }

  decode(ids: ArrayLike<number>): string {
    const d = this.createDecoder();
    let s = "";
    for (let i = 0; i < ids.length; i++) s += d.push(ids[i]);
    return s + d.flush();
  }

  createDecoder(): { push(id: number): string; flush(): string } {
    const decoder = new TextDecoder();
    const pieces = this.#pieces;
    return {
      push: (id: number) => decoder.decode(pieces[id], { stream: true }),
      flush: () => decoder.decode(),
    };
  }

  isEog(id: number): boolean {
    return this.#eog.has(id);
  }
}

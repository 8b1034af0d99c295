/**
 * The tokenizer of a model: built once from GGUF metadata, then `encode`
 * text to ids and `decode` ids to text exactly as llama.cpp does for the
 * same file.
 *
 * @example
 * ```ts
 * import { parseGguf } from "../gguf/reader.ts";
 * import { Tokenizer } from "./tokenizer.ts";
 * const tok = Tokenizer.fromGguf(parseGguf(Deno.readFileSync("stories260K.gguf")));
 * tok.encode("Once upon a time"); // [1, 403, 407, 261, 378]
 * tok.decode([403, 407, 261, 378]); // "Once upon a time"
 * ```
 *
 * @module
 */
import type { Gguf } from "../gguf/reader.ts";
import { bpeByteTokens, bpeEncodeWord } from "./bpe.ts";
import {
  checkId,
  type DecodeOptions,
  detokenizeBytes,
  pieceBytes,
  type StreamDecoder,
  streamDecoder,
  type StreamOptions,
} from "./decode.ts";
import { PairHeap } from "./_heap.ts";
import { preSplit } from "./pretokenize.ts";
import { partition } from "./special.ts";
import { spmByteTokens, spmEncode, spmJoinablePairs, spmPieces } from "./spm.ts";
import { decodeUtf8LikeLlama, utf8, wellFormed } from "./unicode.ts";
import { TokenIndex } from "./_token_index.ts";
import { loadVocab, NO_TOKEN, TokenAttr, TokenizerError, type Vocab } from "./vocab.ts";
import { wpmEncode } from "./wpm.ts";

/** Options of {@linkcode Tokenizer.encode}. */
export interface EncodeOptions {
  /** Add BOS/EOS as the model asks (`tokenizer.ggml.add_bos_token`...). Default true. */
  addSpecial?: boolean;
  /** Turn the text of control tokens (`<|eot_id|>`, `<s>`...) into those tokens. Default false. */
  parseSpecial?: boolean;
}

/** Words cached per tokenizer before the cache is emptied. */
const WORD_CACHE_MAX = 100_000;
const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });
const strictDecoder = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true });
/** "▁" as UTF-8 bytes in a one-char-per-byte string. */
const ESCAPED_SPACE = "\xE2\x96\x81";

function isValidUtf8(bytes: Uint8Array): boolean {
  try {
    strictDecoder.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** A string with one char (0..255) per UTF-8 byte of `text` (or per byte given). */
function toBinary(text: string | Uint8Array): string {
  const bytes = typeof text === "string" ? utf8(text) : text;
  let s = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    s += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return s;
}

/** A model's tokenizer (SentencePiece BPE, byte-level BPE or WordPiece). */
export class Tokenizer {
  /** The vocabulary and flags, as loaded. */
  readonly vocab: Vocab;
  readonly #heap = new PairHeap();
  readonly #byteTokens?: Int32Array;
  readonly #wordCache = new Map<string, number[]>();
  #spmPairs?: Set<number>;
  #binaryTokens?: string[];
  #binaryIndex?: TokenIndex;
  readonly #pieces: Array<Uint8Array | undefined>;
  readonly #specialPieces: Array<Uint8Array | undefined>;

  constructor(vocab: Vocab) {
    this.vocab = vocab;
    if (vocab.kind === "spm") this.#byteTokens = spmByteTokens(vocab);
    if (vocab.kind === "bpe") this.#byteTokens = bpeByteTokens(vocab);
    this.#pieces = new Array(vocab.tokens.length);
    this.#specialPieces = new Array(vocab.tokens.length);
  }

  /** Builds the tokenizer of a parsed GGUF file; throws `TokenizerError` on a bad vocabulary. */
  static fromGguf(gguf: Gguf): Tokenizer {
    return new Tokenizer(loadVocab(gguf));
  }

  /** The number of tokens. */
  get vocabSize(): number {
    return this.vocab.tokens.length;
  }
  /** The BOS id, or -1. */
  get bos(): number {
    return this.vocab.bos;
  }
  /** The EOS id, or -1. */
  get eos(): number {
    return this.vocab.eos;
  }
  /** Ids that end generation (EOS, EOT, `<|im_end|>`, `<|eot_id|>`...). */
  get eog(): ReadonlySet<number> {
    return this.vocab.eog;
  }
  /** True if `id` ends generation. */
  isEog(id: number): boolean {
    return this.vocab.eog.has(id);
  }
  /** True if the model wants BOS added. */
  get addBos(): boolean {
    return this.vocab.addBos;
  }

  /** Text to token ids. */
  encode(text: string, options: EncodeOptions = {}): number[] {
    const addSpecial = options.addSpecial ?? true;
    const vocab = this.vocab;
    const fragments = partition(vocab, wellFormed(text), options.parseSpecial ?? false);
    const out: number[] = [];
    if (vocab.kind === "spm") {
      let prevSpecial = true;
      if (addSpecial && vocab.addBos) out.push(this.#need(vocab.bos, "BOS"));
      for (const f of fragments) {
        if (typeof f === "number") {
          out.push(f);
          prevSpecial = true;
          continue;
        }
        const s = (vocab.addSpacePrefix && prevSpecial ? " " : "") + f;
        this.#encodeSpm(s.replaceAll(" ", "\u2581"), out);
        prevSpecial = false;
      }
      if (addSpecial && vocab.addEos) out.push(this.#need(vocab.eos, "EOS"));
    } else if (vocab.kind === "bpe") {
      if (addSpecial && vocab.addBos) out.push(this.#need(vocab.bos, "BOS"));
      for (const f of fragments) {
        if (typeof f === "number") out.push(f);
        else this.#encodeBpe(f, out);
      }
      if (addSpecial && vocab.addEos) out.push(this.#need(vocab.eos, "EOS"));
    } else {
      if (addSpecial) out.push(this.#need(vocab.bos, "BOS"));
      for (const f of fragments) {
        if (typeof f === "number") out.push(f);
        else wpmEncode(vocab, f, out);
      }
      if (addSpecial) out.push(this.#need(vocab.sep, "SEP"));
    }
    return out;
  }

  /**
   * UTF-8 bytes to token ids, exactly as llama.cpp tokenizes bytes: invalid
   * UTF-8 becomes one U+FFFD per bad byte (BPE, WordPiece), and SPM merges the
   * raw bytes. Valid UTF-8 gives the same ids as `encode` of the decoded text.
   */
  encodeBytes(bytes: Uint8Array, options: EncodeOptions = {}): number[] {
    if (this.vocab.kind !== "spm" || isValidUtf8(bytes)) {
      return this.encode(decodeUtf8LikeLlama(bytes), options);
    }
    const vocab = this.vocab;
    const binary = this.#binaryTokens ??= vocab.tokens.map(toBinary);
    const index = this.#binaryIndex ??= new TokenIndex(binary);
    const fragments = partition(
      vocab,
      toBinary(bytes),
      options.parseSpecial ?? false,
      (id) => binary[id],
    );
    const out: number[] = [];
    const addSpecial = options.addSpecial ?? true;
    if (addSpecial && vocab.addBos) out.push(this.#need(vocab.bos, "BOS"));
    let prevSpecial = true;
    for (const f of fragments) {
      if (typeof f === "number") {
        out.push(f);
        prevSpecial = true;
        continue;
      }
      const s = (vocab.addSpacePrefix && prevSpecial ? " " : "") + f;
      spmEncode(vocab, this.#byteTokens!, this.#heap, s.replaceAll(" ", ESCAPED_SPACE), out, index);
      prevSpecial = false;
    }
    if (addSpecial && vocab.addEos) out.push(this.#need(vocab.eos, "EOS"));
    return out;
  }

  #need(id: number, what: string): number {
    if (id === NO_TOKEN) throw new TokenizerError(`the model has no ${what} token`);
    return id;
  }

  #encodeSpm(text: string, out: number[]): void {
    const cache = this.#wordCache;
    this.#spmPairs ??= spmJoinablePairs(this.vocab);
    for (const piece of spmPieces(text, this.#spmPairs)) {
      let ids = cache.get(piece);
      if (ids === undefined) {
        ids = [];
        spmEncode(this.vocab, this.#byteTokens!, this.#heap, piece, ids);
        if (cache.size >= WORD_CACHE_MAX) cache.clear();
        if (piece.length <= 64) cache.set(piece, ids);
      }
      for (let i = 0; i < ids.length; i++) out.push(ids[i]);
    }
  }

  #encodeBpe(text: string, out: number[]): void {
    const cache = this.#wordCache;
    for (const word of preSplit(text, this.vocab.pre!.steps)) {
      let ids = cache.get(word);
      if (ids === undefined) {
        ids = [];
        bpeEncodeWord(this.vocab, this.#byteTokens!, this.#heap, word, ids);
        if (cache.size >= WORD_CACHE_MAX) cache.clear();
        if (word.length <= 64) cache.set(word, ids);
      }
      for (let i = 0; i < ids.length; i++) out.push(ids[i]);
    }
  }

  /** The bytes of one token (`special`: render control/unknown tokens). */
  pieceBytes(id: number, special = true): Uint8Array {
    checkId(this.vocab, id);
    return this.#piece(id, special);
  }

  #piece = (id: number, special: boolean): Uint8Array => {
    const cache = special ? this.#specialPieces : this.#pieces;
    return cache[id] ??= pieceBytes(this.vocab, id, special);
  };

  /** The text of one token (an incomplete UTF-8 sequence shows as U+FFFD). */
  tokenToPiece(id: number, special = true): string {
    return textDecoder.decode(this.pieceBytes(id, special));
  }

  /** Token ids to bytes, as llama.cpp's detokenize. */
  decodeBytes(ids: ArrayLike<number>, options: DecodeOptions = {}): Uint8Array {
    return detokenizeBytes(this.vocab, this.#piece, ids, options);
  }

  /** Token ids to text (invalid UTF-8 shows as U+FFFD). */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    return textDecoder.decode(this.decodeBytes(ids, options));
  }

  /** A streaming decoder for generated tokens. */
  createDecoder(options: StreamOptions = {}): StreamDecoder {
    return streamDecoder(this.vocab, this.#piece, options);
  }

  /** True if `id` is a control token. */
  isControl(id: number): boolean {
    checkId(this.vocab, id);
    return (this.vocab.attrs[id] & TokenAttr.CONTROL) !== 0;
  }
}

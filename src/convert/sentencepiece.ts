/**
 * A SentencePiece `tokenizer.model` (the `ModelProto` protobuf of
 * sentencepiece's `sentencepiece_model.proto`), read by hand from the wire
 * format: the pieces (text, score, type), the trainer spec (model type,
 * vocabulary size, special ids and pieces, byte fallback, ...) and the
 * normalizer specs, with the proto's defaults for absent fields. Unknown
 * fields are skipped, as protobuf does.
 *
 * The file is untrusted: a truncated varint, a field running past its
 * message, a wire type a field cannot have, text that is not UTF-8, or a
 * vocabulary sentencepiece itself refuses to load (an empty or repeated
 * piece, no `<unk>` or two) is a {@linkcode ConvertError} of one line.
 *
 * @example
 * ```ts
 * import { readSentencePieceModel } from "./sentencepiece.ts";
 * const model = readSentencePieceModel("models/gemma-3/tokenizer.model");
 * console.log(model.pieces.length, model.trainerSpec.modelType, model.trainerSpec.byteFallback);
 * ```
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { ConvertError } from "./errors.ts";

/** `ModelProto.SentencePiece.Type`: the numbers gguf's token types share. */
export const PieceType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

/** One piece of the vocabulary. */
export interface SentencePiece {
  readonly piece: string;
  readonly score: number;
  /** One of {@linkcode PieceType}. */
  readonly type: number;
}

/** `TrainerSpec.ModelType`. */
export type SentencePieceModelType = "unigram" | "bpe" | "word" | "char";

/** The `TrainerSpec` fields a converter or tokenizer needs (defaults as in the proto). */
export interface TrainerSpec {
  modelType: SentencePieceModelType;
  vocabSize: number;
  unkId: number;
  bosId: number;
  eosId: number;
  padId: number;
  unkPiece: string;
  bosPiece: string;
  eosPiece: string;
  padPiece: string;
  unkSurface: string;
  byteFallback: boolean;
  splitDigits: boolean;
  splitByWhitespace: boolean;
  treatWhitespaceAsSuffix: boolean;
  allowWhitespaceOnlyPieces: boolean;
  characterCoverage: number;
  maxSentencepieceLength: number;
  controlSymbols: string[];
  userDefinedSymbols: string[];
}

/** `NormalizerSpec` (also the denormalizer's). */
export interface NormalizerSpec {
  name: string;
  precompiledCharsmap: Uint8Array;
  addDummyPrefix: boolean;
  removeExtraWhitespaces: boolean;
  escapeWhitespaces: boolean;
  normalizationRuleTsv: string;
}

/** A parsed `tokenizer.model`. */
export interface SentencePieceModel {
  readonly pieces: readonly SentencePiece[];
  readonly trainerSpec: TrainerSpec;
  readonly normalizerSpec: NormalizerSpec;
  /** Present only when the file has one. */
  readonly denormalizerSpec?: NormalizerSpec;
}

const MODEL_TYPES: Record<number, SentencePieceModelType> = {
  1: "unigram",
  2: "bpe",
  3: "word",
  4: "char",
};

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A protobuf message's fields, read one at a time. */
class Reader {
  pos: number;
  readonly view: DataView;
  constructor(
    readonly bytes: Uint8Array,
    readonly where: string,
    start = 0,
    readonly end = bytes.length,
    view?: DataView,
  ) {
    this.pos = start;
    this.view = view ?? new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  fail(what: string): never {
    throw new ConvertError(`${this.where}: ${what} at byte ${this.pos}`);
  }

  /** A varint's low 32 bits (as unsigned) and whether any higher bit is set. */
  varint(): { lo: number; high: boolean } {
    let lo = 0, high = false;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) this.fail("truncated varint");
      const b = this.bytes[this.pos++];
      const bits = b & 0x7f;
      if (i < 4) lo |= bits << (7 * i);
      else if (i === 4) {
        lo |= (bits & 0x0f) << 28;
        if (bits >> 4) high = true;
      } else if (bits) high = true;
      if ((b & 0x80) === 0) return { lo: lo >>> 0, high };
    }
    this.fail("varint longer than 10 bytes");
  }

  /** An int32 / enum field (negative values are 10-byte varints). */
  int32(): number {
    return this.varint().lo | 0;
  }

  bool(): boolean {
    const v = this.varint();
    return v.lo !== 0 || v.high;
  }

  /** Field number and wire type of the next field, or undefined at the end. */
  tag(): { field: number; wire: number } | undefined {
    if (this.pos >= this.end) return undefined;
    const { lo, high } = this.varint();
    const field = lo >>> 3;
    if (high || field === 0) this.fail(`bad field number ${high ? "past 2^29" : 0}`);
    return { field, wire: lo & 7 };
  }

  /** The bounds of a length-delimited field. */
  span(): [number, number] {
    const { lo, high } = this.varint();
    if (high || lo > this.end - this.pos) {
      this.fail(`a field of ${high ? "over 2^32" : lo} bytes runs past the end`);
    }
    const start = this.pos;
    this.pos += lo;
    return [start, this.pos];
  }

  string(): string {
    const [s, e] = this.span();
    return this.decode(s, e);
  }

  /** The UTF-8 text of `bytes[s, e)`. */
  decode(s: number, e: number): string {
    try {
      return utf8.decode(this.bytes.subarray(s, e));
    } catch {
      this.pos = s;
      this.fail("text that is not UTF-8");
    }
  }

  float(): number {
    if (this.end - this.pos < 4) this.fail("truncated float");
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }

  /** Skips a field of an unknown number. */
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.advance(8);
    else if (wire === 2) this.span();
    else if (wire === 5) this.advance(4);
    else this.fail(`unsupported wire type ${wire}`);
  }

  advance(n: number): void {
    if (this.end - this.pos < n) this.fail("truncated fixed-width field");
    this.pos += n;
  }

  /** Checks a known field has the wire type it must have. */
  expect(field: number, wire: number, want: number): void {
    if (wire !== want) this.fail(`field ${field} has wire type ${wire}, expected ${want}`);
  }
}

/** The wire type of each known field of a message (0 varint, 2 length-delimited, 5 fixed32). */
const PIECE_WIRE: Record<number, number> = { 1: 2, 2: 5, 3: 0 };

function readPiece(r: Reader, index: number): SentencePiece {
  let piece: string | undefined, score = 0, type: number = PieceType.NORMAL;
  for (let t = r.tag(); t !== undefined; t = r.tag()) {
    const want = PIECE_WIRE[t.field];
    if (want === undefined) {
      r.skip(t.wire);
      continue;
    }
    r.expect(t.field, t.wire, want);
    if (t.field === 1) {
      const [start, end] = r.span();
      // sentencepiece's kMaxPieceSize, in bytes.
      if (end - start >= 8000) throw new ConvertError(`${r.where}: piece ${index} is too long`);
      piece = r.decode(start, end);
    } else if (t.field === 2) score = r.float();
    else type = r.int32();
  }
  if (piece === undefined || piece.length === 0) {
    throw new ConvertError(`${r.where}: piece ${index} is empty`);
  }
  if (type < 1 || type > 6) {
    throw new ConvertError(`${r.where}: piece ${index} has unknown type ${type}`);
  }
  return { piece, score, type };
}

function defaultTrainer(): TrainerSpec {
  return {
    modelType: "unigram",
    vocabSize: 8000,
    unkId: 0,
    bosId: 1,
    eosId: 2,
    padId: -1,
    unkPiece: "<unk>",
    bosPiece: "<s>",
    eosPiece: "</s>",
    padPiece: "<pad>",
    unkSurface: " \u2047 ",
    byteFallback: false,
    splitDigits: false,
    splitByWhitespace: true,
    treatWhitespaceAsSuffix: false,
    allowWhitespaceOnlyPieces: false,
    characterCoverage: 0.9995,
    maxSentencepieceLength: 16,
    controlSymbols: [],
    userDefinedSymbols: [],
  };
}

function readTrainer(r: Reader, spec: TrainerSpec): void {
  const ints: Record<number, "vocabSize" | "unkId" | "bosId" | "eosId" | "padId"> = {
    4: "vocabSize",
    40: "unkId",
    41: "bosId",
    42: "eosId",
    43: "padId",
  };
  const strings: Record<number, "unkPiece" | "bosPiece" | "eosPiece" | "padPiece" | "unkSurface"> =
    { 45: "unkPiece", 46: "bosPiece", 47: "eosPiece", 48: "padPiece", 44: "unkSurface" };
  const bools: Record<
    number,
    | "byteFallback"
    | "splitDigits"
    | "splitByWhitespace"
    | "treatWhitespaceAsSuffix"
    | "allowWhitespaceOnlyPieces"
  > = {
    35: "byteFallback",
    25: "splitDigits",
    22: "splitByWhitespace",
    24: "treatWhitespaceAsSuffix",
    26: "allowWhitespaceOnlyPieces",
  };
  for (let t = r.tag(); t !== undefined; t = r.tag()) {
    const f = t.field;
    if (f === 3) {
      r.expect(f, t.wire, 0);
      const v = r.int32();
      const type = MODEL_TYPES[v];
      if (type === undefined) r.fail(`unknown model_type ${v}`);
      spec.modelType = type;
    } else if (ints[f] !== undefined) {
      r.expect(f, t.wire, 0);
      spec[ints[f]] = r.int32();
    } else if (f === 20) {
      r.expect(f, t.wire, 0);
      spec.maxSentencepieceLength = r.int32();
    } else if (strings[f] !== undefined) {
      r.expect(f, t.wire, 2);
      spec[strings[f]] = r.string();
    } else if (bools[f] !== undefined) {
      r.expect(f, t.wire, 0);
      spec[bools[f]] = r.bool();
    } else if (f === 10) {
      r.expect(f, t.wire, 5);
      spec.characterCoverage = r.float();
    } else if (f === 30 || f === 31) {
      r.expect(f, t.wire, 2);
      (f === 30 ? spec.controlSymbols : spec.userDefinedSymbols).push(r.string());
    } else r.skip(t.wire);
  }
}

function defaultNormalizer(): NormalizerSpec {
  return {
    name: "",
    precompiledCharsmap: new Uint8Array(0),
    addDummyPrefix: true,
    removeExtraWhitespaces: true,
    escapeWhitespaces: true,
    normalizationRuleTsv: "",
  };
}

function readNormalizer(r: Reader, spec: NormalizerSpec): void {
  for (let t = r.tag(); t !== undefined; t = r.tag()) {
    const f = t.field;
    if (f === 1 || f === 6) {
      r.expect(f, t.wire, 2);
      if (f === 1) spec.name = r.string();
      else spec.normalizationRuleTsv = r.string();
    } else if (f === 2) {
      r.expect(f, t.wire, 2);
      const [s, e] = r.span();
      spec.precompiledCharsmap = r.bytes.slice(s, e);
    } else if (f === 3 || f === 4 || f === 5) {
      r.expect(f, t.wire, 0);
      const v = r.bool();
      if (f === 3) spec.addDummyPrefix = v;
      else if (f === 4) spec.removeExtraWhitespaces = v;
      else spec.escapeWhitespaces = v;
    } else r.skip(t.wire);
  }
}

/**
 * Parses the bytes of a `tokenizer.model`; `name` prefixes error messages.
 * Throws {@linkcode ConvertError} for malformed bytes or a vocabulary
 * sentencepiece would not load.
 */
export function parseSentencePieceModel(
  bytes: Uint8Array,
  name = "tokenizer.model",
): SentencePieceModel {
  const r = new Reader(bytes, name);
  const pieces: SentencePiece[] = [];
  const trainerSpec = defaultTrainer();
  const normalizerSpec = defaultNormalizer();
  let denormalizerSpec: NormalizerSpec | undefined;
  for (let t = r.tag(); t !== undefined; t = r.tag()) {
    const f = t.field;
    if (f === 1 || f === 2 || f === 3 || f === 5) {
      r.expect(f, t.wire, 2);
      const [s, e] = r.span();
      const sub = new Reader(bytes, name, s, e, r.view);
      if (f === 1) pieces.push(readPiece(sub, pieces.length));
      else if (f === 2) readTrainer(sub, trainerSpec);
      else if (f === 3) readNormalizer(sub, normalizerSpec);
      else readNormalizer(sub, denormalizerSpec ??= defaultNormalizer());
    } else r.skip(t.wire);
  }
  if (pieces.length === 0) throw new ConvertError(`${name}: no pieces (not a SentencePiece model)`);
  // sentencepiece's ModelInterface::InitializePieces refuses these.
  const normal = new Map<string, number>(), reserved = new Map<string, number>();
  const bytesFound = new Set<number>();
  let unknown = -1;
  pieces.forEach((p, i) => {
    if (p.piece.includes("\0")) throw new ConvertError(`${name}: piece ${i} holds a NUL character`);
    const isNormal = p.type === PieceType.NORMAL || p.type === PieceType.USER_DEFINED ||
      p.type === PieceType.UNUSED;
    const map = isNormal ? normal : reserved;
    const before = map.get(p.piece);
    if (before !== undefined) {
      throw new ConvertError(
        `${name}: piece ${JSON.stringify(p.piece)} is defined twice (ids ${before} and ${i})`,
      );
    }
    map.set(p.piece, i);
    if (p.type === PieceType.UNKNOWN) {
      if (unknown >= 0) throw new ConvertError(`${name}: two unknown pieces (${unknown}, ${i})`);
      unknown = i;
    }
    if (p.type === PieceType.BYTE) {
      if (!trainerSpec.byteFallback) {
        throw new ConvertError(`${name}: byte piece ${i} but byte_fallback is false`);
      }
      const m = /^<0x([0-9A-F]{2})>$/.exec(p.piece);
      if (m === null) {
        throw new ConvertError(
          `${name}: byte piece ${i} is ${JSON.stringify(p.piece)}, not <0xXX>`,
        );
      }
      bytesFound.add(parseInt(m[1], 16));
    }
  });
  if (unknown < 0) throw new ConvertError(`${name}: no unknown piece (<unk>)`);
  if (trainerSpec.byteFallback && bytesFound.size !== 256) {
    throw new ConvertError(`${name}: byte_fallback but only ${bytesFound.size} of 256 byte pieces`);
  }
  return { pieces, trainerSpec, normalizerSpec, ...(denormalizerSpec ? { denormalizerSpec } : {}) };
}

/** Reads and parses the `tokenizer.model` at `path`. */
export function readSentencePieceModel(path: string): SentencePieceModel {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw new ConvertError(`${path}: ${(error as Error).message.split("\n")[0]}`);
  }
  return parseSentencePieceModel(bytes, path.split("/").pop() ?? path);
}

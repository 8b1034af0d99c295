/**
 * The table of every ggml tensor type: its id, name, elements per block and
 * bytes per block. Every type can be inspected; only some can be computed.
 *
 * @module
 */

/** One ggml tensor type. */
export interface GgmlTypeInfo {
  /** The id stored in GGUF tensor infos. */
  readonly id: number;
  /** ggml's name, e.g. `Q8_0`. */
  readonly name: string;
  /** Elements per block (1 for plain types). */
  readonly blockSize: number;
  /** Bytes per block. */
  readonly blockBytes: number;
  /** True for ids ggml has since removed (still listed so old files inspect). */
  readonly removed?: boolean;
}

const QK_K = 256;

/** Every ggml type by id (gaps are ids ggml never assigned or reused). */
export const GGML_TYPES = [
  { id: 0, name: "F32", blockSize: 1, blockBytes: 4 },
  { id: 1, name: "F16", blockSize: 1, blockBytes: 2 },
  { id: 2, name: "Q4_0", blockSize: 32, blockBytes: 18 },
  { id: 3, name: "Q4_1", blockSize: 32, blockBytes: 20 },
  { id: 6, name: "Q5_0", blockSize: 32, blockBytes: 22 },
  { id: 7, name: "Q5_1", blockSize: 32, blockBytes: 24 },
  { id: 8, name: "Q8_0", blockSize: 32, blockBytes: 34 },
  { id: 9, name: "Q8_1", blockSize: 32, blockBytes: 36 },
  { id: 10, name: "Q2_K", blockSize: QK_K, blockBytes: 84 },
  { id: 11, name: "Q3_K", blockSize: QK_K, blockBytes: 110 },
  { id: 12, name: "Q4_K", blockSize: QK_K, blockBytes: 144 },
  { id: 13, name: "Q5_K", blockSize: QK_K, blockBytes: 176 },
  { id: 14, name: "Q6_K", blockSize: QK_K, blockBytes: 210 },
  { id: 15, name: "Q8_K", blockSize: QK_K, blockBytes: 292 },
  { id: 16, name: "IQ2_XXS", blockSize: QK_K, blockBytes: 66 },
  { id: 17, name: "IQ2_XS", blockSize: QK_K, blockBytes: 74 },
  { id: 18, name: "IQ3_XXS", blockSize: QK_K, blockBytes: 98 },
  { id: 19, name: "IQ1_S", blockSize: QK_K, blockBytes: 50 },
  { id: 20, name: "IQ4_NL", blockSize: 32, blockBytes: 18 },
  { id: 21, name: "IQ3_S", blockSize: QK_K, blockBytes: 110 },
  { id: 22, name: "IQ2_S", blockSize: QK_K, blockBytes: 82 },
  { id: 23, name: "IQ4_XS", blockSize: QK_K, blockBytes: 136 },
  { id: 24, name: "I8", blockSize: 1, blockBytes: 1 },
  { id: 25, name: "I16", blockSize: 1, blockBytes: 2 },
  { id: 26, name: "I32", blockSize: 1, blockBytes: 4 },
  { id: 27, name: "I64", blockSize: 1, blockBytes: 8 },
  { id: 28, name: "F64", blockSize: 1, blockBytes: 8 },
  { id: 29, name: "IQ1_M", blockSize: QK_K, blockBytes: 56 },
  { id: 30, name: "BF16", blockSize: 1, blockBytes: 2 },
  { id: 31, name: "Q4_0_4_4", blockSize: 32, blockBytes: 18, removed: true },
  { id: 32, name: "Q4_0_4_8", blockSize: 32, blockBytes: 18, removed: true },
  { id: 33, name: "Q4_0_8_8", blockSize: 32, blockBytes: 18, removed: true },
  { id: 34, name: "TQ1_0", blockSize: QK_K, blockBytes: 54 },
  { id: 35, name: "TQ2_0", blockSize: QK_K, blockBytes: 66 },
  { id: 36, name: "IQ4_NL_4_4", blockSize: 32, blockBytes: 18, removed: true },
  { id: 37, name: "IQ4_NL_4_8", blockSize: 32, blockBytes: 18, removed: true },
  { id: 38, name: "IQ4_NL_8_8", blockSize: 32, blockBytes: 18, removed: true },
  { id: 39, name: "MXFP4", blockSize: 32, blockBytes: 17 },
] as const satisfies readonly GgmlTypeInfo[];

const byId = new Map<number, GgmlTypeInfo>(GGML_TYPES.map((t) => [t.id, t]));
const byName = new Map<string, GgmlTypeInfo>(GGML_TYPES.map((t) => [t.name, t]));

/** The type with id `id`, or undefined for an unknown id. */
export function ggmlTypeById(id: number): GgmlTypeInfo | undefined {
  return byId.get(id);
}

/** The type named `name` (e.g. `"Q8_0"`); throws `TypeError` for an unknown name. */
export function ggmlTypeByName(name: string): GgmlTypeInfo {
  const t = byName.get(name.toUpperCase());
  if (t === undefined) throw new TypeError(`Unknown ggml type "${name}"`);
  return t;
}

/** The name of a ggml type. */
export type GgmlTypeName = (typeof GGML_TYPES)[number]["name"];

/** Type ids by name (`GgmlType.Q8_0 === 8`), derived from {@linkcode GGML_TYPES}. */
export const GgmlType: Readonly<Record<GgmlTypeName, number>> = Object.freeze(
  Object.fromEntries(GGML_TYPES.map((t) => [t.name, t.id])) as Record<GgmlTypeName, number>,
);

/**
 * What the native library computes, per ggml type: read once from its type table
 * (`dotllm_type_info`, `ffi/types.zig`), so no block size or "computable" flag is
 * written on this side. Ids come from the GGUF reader's table of every ggml type.
 *
 * @example
 * ```ts
 * import { loadNative } from "../native/mod.ts";
 * import { computableType } from "./types.ts";
 * import { GgmlType } from "../gguf/mod.ts";
 * const q8 = computableType(loadNative(), GgmlType.Q8_0);
 * console.log(q8?.blockElems, q8?.blockBytes); // 32 34
 * ```
 *
 * @module
 */
import { GGML_TYPES } from "../gguf/types.ts";
import type { Native } from "../native/mod.ts";

/** A type the library computes with (matmul, row lookup, row conversions). */
export interface ComputableType {
  /** ggml's type id. */
  readonly id: number;
  /** ggml's name, e.g. `Q4_K`. */
  readonly name: string;
  /** Elements per block (1 for the float types). */
  readonly blockElems: number;
  /** Bytes per block. */
  readonly blockBytes: number;
  /**
   * Rows of a table of this type can be looked up by id (`get_rows`): every GGUF
   * type, and the float layouts (so a tied LM head in one still serves as the
   * token embedding).
   */
  readonly rowLookup: boolean;
}

/**
 * Bytes of `dotllm_type_info`'s `TypeInfo`: block_elems, block_bytes (u32),
 * name[12], row_lookup (u32).
 */
const TYPE_INFO_BYTES = 24;

const tables = new WeakMap<Native, ReadonlyMap<number, ComputableType>>();

/** Every type `native` computes with, by id (asked once per library). */
export function computableTypes(native: Native): ReadonlyMap<number, ComputableType> {
  let table = tables.get(native);
  if (table !== undefined) return table;
  const map = new Map<number, ComputableType>();
  for (const t of GGML_TYPES) {
    const info = typeInfo(native, t.id);
    if (info !== undefined) map.set(t.id, info);
  }
  table = map;
  tables.set(native, table);
  return table;
}

const layouts = new WeakMap<Native, Map<number, ComputableType | undefined>>();

/**
 * The computable type with id `id`, or undefined: a GGUF type, or one of the
 * library's interleaved layouts (`ffi/repack.zig`; ids outside ggml's, that
 * only load-time repacking produces).
 */
export function computableType(native: Native, id: number): ComputableType | undefined {
  const t = computableTypes(native).get(id);
  if (t !== undefined) return t;
  let asked = layouts.get(native);
  if (asked === undefined) layouts.set(native, asked = new Map());
  if (!asked.has(id)) asked.set(id, typeInfo(native, id));
  return asked.get(id);
}

function typeInfo(native: Native, id: number): ComputableType | undefined {
  if (!Number.isInteger(id) || id < 0 || id > 0xffff_ffff) return undefined;
  using info = native.alloc(TYPE_INFO_BYTES);
  if (native.fn.dotllm_type_info(id, info.address) !== 0) return undefined;
  const words = new Uint32Array(info.buffer, 0, 2);
  const nameBytes = new Uint8Array(info.buffer, 8, 12);
  const end = nameBytes.indexOf(0);
  const name = new TextDecoder().decode(nameBytes.subarray(0, end < 0 ? 12 : end));
  const rowLookup = new Uint32Array(info.buffer, 20, 1)[0] === 1;
  return { id, name, blockElems: words[0], blockBytes: words[1], rowLookup };
}

/**
 * Bytes of `elements` elements of type `id`: throws `RangeError` for a type the
 * library does not compute or a count that is not a whole number of blocks.
 */
export function rowBytes(native: Native, id: number, elements: number): number {
  const t = computableType(native, id);
  if (t === undefined) throw new RangeError(`type ${typeName(id)} is not computable`);
  if (!Number.isSafeInteger(elements) || elements < 0 || elements % t.blockElems !== 0) {
    throw new RangeError(
      `${t.name} rows need a multiple of ${t.blockElems} elements, got ${elements}`,
    );
  }
  return (elements / t.blockElems) * t.blockBytes;
}

function typeName(id: number): string {
  return GGML_TYPES.find((t) => t.id === id)?.name ?? `#${id}`;
}

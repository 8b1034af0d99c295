/**
 * A tiny GGUF v3 writer for tests: metadata only (no tensors), enough to build
 * small or deliberately broken vocabularies by hand.
 *
 * @module
 */

/** A metadata value to write: its GGUF type is given explicitly. */
export type KvValue =
  | { type: "string"; value: string }
  | { type: "u32" | "i32" | "f32"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "array"; of: "string"; value: string[] }
  | { type: "array"; of: "i32" | "f32" | "u8"; value: number[] };

const TYPE_ID = { u8: 0, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const;

class Bytes {
  parts: number[] = [];
  u32(v: number) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, v, true);
    this.parts.push(...b);
  }
  u64(v: number) {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(v), true);
    this.parts.push(...b);
  }
  i32(v: number) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setInt32(0, v, true);
    this.parts.push(...b);
  }
  f32(v: number) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.parts.push(...b);
  }
  str(s: string) {
    const b = new TextEncoder().encode(s);
    this.u64(b.length);
    for (const x of b) this.parts.push(x);
  }
  scalar(type: "u8" | "u32" | "i32" | "f32" | "string", v: number | string) {
    if (type === "string") this.str(v as string);
    else if (type === "u32") this.u32(v as number);
    else if (type === "i32") this.i32(v as number);
    else if (type === "u8") this.parts.push(v as number);
    else this.f32(v as number);
  }
}

/** The bytes of a GGUF v3 file with these KVs and no tensors. */
export function ggufBytes(kvs: Record<string, KvValue>): Uint8Array {
  const out = new Bytes();
  out.parts.push(0x47, 0x47, 0x55, 0x46); // "GGUF"
  out.u32(3);
  out.u64(0); // tensors
  out.u64(Object.keys(kvs).length);
  for (const [key, kv] of Object.entries(kvs)) {
    out.str(key);
    out.u32(TYPE_ID[kv.type]);
    if (kv.type === "array") {
      out.u32(TYPE_ID[kv.of]);
      out.u64(kv.value.length);
      for (const v of kv.value) out.scalar(kv.of, v);
    } else if (kv.type === "bool") {
      out.parts.push(kv.value ? 1 : 0);
    } else {
      out.scalar(kv.type, kv.value);
    }
  }
  return Uint8Array.from(out.parts);
}

/** Shorthands for `ggufBytes` values. */
export const kv = {
  str: (value: string): KvValue => ({ type: "string", value }),
  u32: (value: number): KvValue => ({ type: "u32", value }),
  bool: (value: boolean): KvValue => ({ type: "bool", value }),
  strings: (value: string[]): KvValue => ({ type: "array", of: "string", value }),
  i32s: (value: number[]): KvValue => ({ type: "array", of: "i32", value }),
  f32s: (value: number[]): KvValue => ({ type: "array", of: "f32", value }),
};

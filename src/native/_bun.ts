/** The Bun adapter: `bun:ffi` over the neutral symbol table. @module */
import type { NativeFunctions, NativeType, SymbolSpec } from "./symbols.ts";
import type { RuntimeAdapter } from "./_adapter.ts";

const bunTypes: Record<NativeType, string> = {
  void: "void",
  u8: "u8",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
  usize: "u64_fast",
  f32: "f32",
  f64: "f64",
  ptr: "ptr",
};

interface BunFfi {
  dlopen(
    path: string,
    defs: Record<string, { args: string[]; returns: string }>,
  ): { symbols: Record<string, (...a: unknown[]) => unknown>; close(): void };
  toArrayBuffer(address: number, byteOffset: number, byteLength: number): ArrayBuffer;
}

/** Opens `path` with `bun:ffi`. */
export function openBun(
  path: string,
  table: Record<string, SymbolSpec>,
): RuntimeAdapter {
  // Bun's synchronous `import.meta.require`; Deno's types do not know it.
  const meta = import.meta as unknown as { require(specifier: string): unknown };
  const ffi = meta.require("bun:ffi") as BunFfi;
  const defs: Record<string, { args: string[]; returns: string }> = {};
  for (const [name, spec] of Object.entries(table)) {
    defs[name] = { args: spec.args.map((t) => bunTypes[t]), returns: bunTypes[spec.result] };
  }
  const lib = ffi.dlopen(path, defs);
  const functions: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table)) {
    const f = lib.symbols[name];
    // Bun returns a null `ptr` as null; the neutral table says 0.
    functions[name] = spec.result === "ptr"
      ? (...a: unknown[]) => (f(...a) as number | null) ?? 0
      : f;
  }
  return {
    runtime: "bun",
    functions: functions as NativeFunctions,
    view(address: number, byteLength: number): ArrayBuffer {
      if (byteLength === 0) return new ArrayBuffer(0);
      if (address === 0) throw new RangeError("Cannot view the null address");
      return ffi.toArrayBuffer(address, 0, byteLength);
    },
    close: () => lib.close(),
  };
}

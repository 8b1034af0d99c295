/** The Deno adapter: `Deno.dlopen` over the neutral symbol table. @module */
import type { NativeFunctions, NativeType, SymbolSpec } from "./symbols.ts";
import type { RuntimeAdapter } from "./_adapter.ts";

// Addresses cross as `usize` (a number in and out), the C ABI of a pointer on
// every 64-bit target we build for; Deno's pointer objects would cost an
// allocation per call.
const denoTypes = {
  void: "void",
  u8: "u8",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
  usize: "usize",
  f32: "f32",
  f64: "f64",
  ptr: "usize",
} as const satisfies Record<NativeType, Deno.NativeResultType>;

/** Opens `path` with `Deno.dlopen`. */
export function openDeno(
  path: string,
  table: Record<string, SymbolSpec>,
): RuntimeAdapter {
  const defs: Record<string, Deno.ForeignFunction> = {};
  for (const [name, spec] of Object.entries(table)) {
    defs[name] = {
      parameters: spec.args.map((t) => denoTypes[t]) as Deno.NativeType[],
      result: denoTypes[spec.result],
    };
  }
  const lib = Deno.dlopen(path, defs);
  const raw = lib.symbols as Record<string, (...a: unknown[]) => unknown>;
  const functions: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table)) {
    const f = raw[name];
    // usize results may come back as bigint; addresses are always < 2^53.
    functions[name] = spec.result === "ptr" || spec.result === "usize"
      ? (...a: unknown[]) => Number(f(...a))
      : f;
  }
  return {
    runtime: "deno",
    functions: functions as NativeFunctions,
    view(address: number, byteLength: number): ArrayBuffer {
      if (byteLength === 0) return new ArrayBuffer(0);
      const pointer = Deno.UnsafePointer.create(BigInt(address));
      if (pointer === null) throw new RangeError("Cannot view the null address");
      return Deno.UnsafePointerView.getArrayBuffer(pointer, byteLength);
    },
    close: () => lib.close(),
  };
}

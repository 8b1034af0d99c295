/**
 * The runtime-neutral table of every symbol the native library exports.
 *
 * Pointers cross the boundary as plain addresses (`number`): every buffer the
 * native side reads or writes is native memory (`dotllm_alloc` or a file
 * mapping), viewed from JavaScript as an ArrayBuffer. The Deno and Bun
 * adapters translate these neutral types into their own FFI types.
 *
 * @module
 */

/** A neutral FFI type: `ptr` is an address, `usize` a size or count. */
export type NativeType =
  | "void"
  | "u8"
  | "i32"
  | "u32"
  | "i64"
  | "u64"
  | "usize"
  | "f32"
  | "f64"
  | "ptr";

/** One exported function: its argument types and result type. */
export interface SymbolSpec {
  readonly args: readonly NativeType[];
  readonly result: NativeType;
}

/** The ABI version this TypeScript code was written for (see `ffi/lib.zig`). */
export const ABI_VERSION = 10;

/** Every symbol of `ffi/`, by name. Keep in the order of the Zig files. */
export const symbols = {
  // ffi/lib.zig
  dotllm_abi_version: { args: [], result: "u32" },
  // ffi/cpu.zig
  dotllm_cpu_features: { args: [], result: "u32" },
  // ffi/mem.zig
  dotllm_alloc: { args: ["usize"], result: "ptr" },
  dotllm_free: { args: ["ptr", "usize"], result: "void" },
  dotllm_map_file: { args: ["ptr", "usize", "ptr"], result: "i32" },
  dotllm_unmap_file: { args: ["ptr", "usize"], result: "void" },
  dotllm_release_pages: { args: ["ptr", "usize"], result: "void" },
  // ffi/pool.zig
  dotllm_pool_create: { args: ["u32"], result: "ptr" },
  dotllm_pool_destroy: { args: ["ptr"], result: "void" },
  dotllm_pool_thread_count: { args: ["ptr"], result: "u32" },
  dotllm_pool_reserve: { args: ["ptr", "usize"], result: "i32" },
  dotllm_cpu_count: { args: [], result: "u32" },
  dotllm_pool_noop: { args: ["ptr"], result: "i32" },
  dotllm_pool_panic_test: { args: ["ptr"], result: "i32" },
  // ffi/types.zig: the type table
  dotllm_type_info: { args: ["u32", "ptr"], result: "i32" },
  dotllm_quantize_row: { args: ["u32", "ptr", "ptr", "usize"], result: "i32" },
  dotllm_dequantize_row: { args: ["u32", "ptr", "ptr", "usize"], result: "i32" },
  dotllm_repack_type: { args: ["u32", "usize", "usize"], result: "i32" },
  dotllm_repack: { args: ["u32", "usize", "usize", "ptr", "ptr"], result: "i32" },
  // ffi/bandwidth.zig
  dotllm_bandwidth_read: { args: ["ptr", "ptr", "usize"], result: "u64" },
  // ffi/graph.zig
  dotllm_graph_run: { args: ["ptr", "ptr", "usize"], result: "i32" },
  dotllm_op_schema: { args: ["ptr", "usize"], result: "usize" },
  dotllm_limits: { args: ["ptr", "usize"], result: "usize" },
  dotllm_matmul_scratch_bytes: { args: ["usize", "usize"], result: "usize" },
} as const satisfies Record<string, SymbolSpec>;

/** The symbol table's type. */
export type Symbols = typeof symbols;

type JsType<T extends NativeType> = T extends "void" ? void
  : T extends "i64" | "u64" ? bigint
  : number;

type JsArgs<A extends readonly NativeType[]> = { [K in keyof A]: JsType<A[K]> };

/** The callable functions of a loaded library, typed from {@linkcode symbols}. */
export type NativeFunctions = {
  readonly [K in keyof Symbols]: (
    ...args: JsArgs<Symbols[K]["args"]>
  ) => JsType<Symbols[K]["result"]>;
};

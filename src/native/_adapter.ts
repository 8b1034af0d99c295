/** What each runtime adapter provides. @module */
import type { NativeFunctions } from "./symbols.ts";

/** The JavaScript runtime dotllm is running on. */
export type Runtime = "deno" | "bun";

/** A library opened by one runtime's FFI. */
export interface RuntimeAdapter {
  readonly runtime: Runtime;
  readonly functions: NativeFunctions;
  /** An ArrayBuffer over native memory (no copy); valid until that memory is freed. */
  view(address: number, byteLength: number): ArrayBuffer;
  close(): void;
}

/** Detects the runtime from its globals. */
export function detectRuntime(): Runtime {
  const g = globalThis as { Bun?: unknown; Deno?: unknown };
  if (g.Bun !== undefined) return "bun";
  if (g.Deno !== undefined) return "deno";
  throw new Error("dotllm runs on Deno or Bun; this runtime is neither");
}

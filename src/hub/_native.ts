/**
 * The native library's download helpers (`ffi/sha256.zig`,
 * `ffi/file_write.zig`) opened for `nonblocking` calls: under Deno each call
 * runs on a thread of its own and resolves a promise, so hashing and writing
 * a batch overlap reading the next one off the network instead of taking
 * turns with it on the one JavaScript thread.
 *
 * `null` under Bun (its FFI has no such calls), without `--allow-ffi`, without
 * the library, or with one older than these functions; then the hub hashes
 * with `node:crypto` and writes with `node:fs` on the calling thread.
 * `DOTLLM_HUB_NATIVE=0` asks for that path under Deno too (tests and
 * bench/pull.ts compare the two).
 *
 * @module
 */
import process from "node:process";
import { detectRuntime } from "../native/_adapter.ts";
import { locateLibrary } from "../native/locate.ts";

const downloadSymbols = {
  dotllm_sha256_create: { parameters: [], result: "usize" },
  dotllm_sha256_update: {
    parameters: ["usize", "buffer", "usize"],
    result: "void",
    nonblocking: true,
  },
  dotllm_sha256_final: { parameters: ["usize", "buffer"], result: "void" },
  dotllm_write_at: {
    parameters: ["i32", "buffer", "usize", "u64"],
    result: "i32",
    nonblocking: true,
  },
} as const;

/** The functions, as `Deno.dlopen` types them. */
export type DownloadNative = Deno.DynamicLibrary<typeof downloadSymbols>["symbols"];

let opened: DownloadNative | null | undefined;

/** The native download functions, or `null` (see the module doc); opened once per process. */
export function downloadNative(): DownloadNative | null {
  if (opened !== undefined) return opened;
  opened = null;
  try {
    if (detectRuntime() !== "deno" || process.env.DOTLLM_HUB_NATIVE === "0") return opened;
    // Both x86-64 builds (baseline, AVX-512) pick SHA-NI at run time: the baseline will do.
    opened = Deno.dlopen(locateLibrary().path, downloadSymbols).symbols;
  } catch {
    opened = null; // no --allow-ffi, no library, or one from before these functions
  }
  return opened;
}

/** Messages for `dotllm_write_at`'s negated error codes (`ffi/file_write.zig`). */
const WRITE_ERRORS: Record<number, string> = {
  2: "no space left on the device",
  3: "disk quota exceeded",
  4: "file too large",
  5: "input/output error",
  6: "bad file descriptor",
};

/** `dotllm_write_at`'s code for "not on this OS". */
export const WRITE_UNSUPPORTED = -1;

/** The message for a negated `dotllm_write_at` code. */
export function writeErrorMessage(code: number): string {
  return WRITE_ERRORS[-code] ?? `error ${-code}`;
}

/**
 * Loads the native library once per process and checks its ABI version.
 *
 * @example
 * ```ts
 * import { loadNative } from "./native.ts";
 * const native = loadNative();
 * const buffer = native.alloc(1024);
 * buffer.f32()[0] = 1.5;
 * buffer.free();
 * ```
 *
 * @module
 */
import process from "node:process";
import { detectRuntime, type RuntimeAdapter } from "./_adapter.ts";
import { openBun } from "./_bun.ts";
import { openDeno } from "./_deno.ts";
import { locateLibrary } from "./locate.ts";
import { ABI_VERSION, type NativeFunctions, symbols } from "./symbols.ts";

/** A 64-byte aligned, zero-filled native buffer, viewed from JavaScript without copies. */
export class NativeBuffer {
  #native: Native;
  #address: number;
  /** Size in bytes. */
  readonly byteLength: number;
  /** The bytes, as a view of native memory. */
  readonly buffer: ArrayBuffer;

  constructor(native: Native, address: number, byteLength: number) {
    this.#native = native;
    this.#address = address;
    this.byteLength = byteLength;
    this.buffer = native.view(address, byteLength);
  }

  /** The buffer's address; throws once freed. */
  get address(): number {
    if (this.#address === 0) throw new Error("NativeBuffer used after free");
    return this.#address;
  }

  /** A byte view. */
  bytes(): Uint8Array {
    return new Uint8Array(this.buffer);
  }

  /** A float32 view of the whole buffer (its size must be a multiple of 4). */
  f32(): Float32Array {
    return new Float32Array(this.buffer);
  }

  /** Frees the memory; later use throws. Freeing twice is a no-op. */
  free(): void {
    if (this.#address === 0) return;
    this.#native.fn.dotllm_free(this.#address, this.byteLength);
    this.#address = 0;
  }

  [Symbol.dispose](): void {
    this.free();
  }
}

const mapErrors: Record<number, string> = {
  1: "no such file",
  2: "permission denied",
  3: "is a directory",
  4: "file too large",
  5: "I/O error",
  6: "bad path",
};

/** A read-only mapping of a whole file. */
export class MappedFile {
  #native: Native;
  #address: number;
  /** The file's path as given. */
  readonly path: string;
  /** The file's size in bytes. */
  readonly byteLength: number;
  /** The file's bytes (a view of the mapping: reading pages them in). */
  readonly bytes: Uint8Array;

  constructor(native: Native, path: string, address: number, byteLength: number) {
    this.#native = native;
    this.path = path;
    this.#address = address;
    this.byteLength = byteLength;
    this.bytes = new Uint8Array(native.view(address, byteLength));
  }

  /** The mapping's base address (0 for an empty file); throws once closed. */
  get address(): number {
    if (this.#address === 0 && this.byteLength !== 0) {
      throw new Error("MappedFile used after close");
    }
    return this.#address;
  }

  /** Unmaps the file; later use of `bytes` is undefined behaviour, so drop every view first. */
  close(): void {
    if (this.#address === 0) return;
    this.#native.fn.dotllm_unmap_file(this.#address, this.byteLength);
    this.#address = 0;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** The native library's limits (`dotllm_limits`): what it refuses past. */
export interface NativeLimits {
  /** Most threads a pool may have. */
  readonly threadCountMax: number;
  /** Largest head dimension RoPE and attention accept. */
  readonly headDimMax: number;
  /** Most tokens (activation rows) one op takes: a batch's ceiling. */
  readonly tokensMax: number;
  /** Most ops one graph holds. */
  readonly opCountMax: number;
}

const LIMIT_KEYS: Record<string, keyof NativeLimits> = {
  thread_count_max: "threadCountMax",
  head_dim_max: "headDimMax",
  tokens_max: "tokensMax",
  op_count_max: "opCountMax",
};

/** The loaded native library. */
export class Native {
  /** The raw exported functions. */
  readonly fn: NativeFunctions;
  /** Where the library was loaded from. */
  readonly path: string;
  /** The runtime's FFI in use. */
  readonly runtime: "deno" | "bun";
  #adapter: RuntimeAdapter;

  constructor(path: string) {
    const runtime = detectRuntime();
    this.#adapter = runtime === "deno" ? openDeno(path, symbols) : openBun(path, symbols);
    this.fn = this.#adapter.functions;
    this.path = path;
    this.runtime = runtime;
    const abi = this.fn.dotllm_abi_version();
    if (abi !== ABI_VERSION) {
      this.#adapter.close();
      throw new Error(
        `native library "${path}" has ABI version ${abi}, this dotllm needs ${ABI_VERSION}: ` +
          "rebuild it with `zig build` (./dotllm rebuilds it when a Zig source changes)",
      );
    }
  }

  #limits?: NativeLimits;

  /** The library's limits, read once from `dotllm_limits`. */
  get limits(): NativeLimits {
    if (this.#limits !== undefined) return this.#limits;
    const capacity = 1024;
    using buffer = this.alloc(capacity);
    const length = this.fn.dotllm_limits(buffer.address, capacity);
    if (length > capacity) throw new Error("dotllm_limits: larger than expected");
    const json = JSON.parse(new TextDecoder().decode(buffer.bytes().subarray(0, length)));
    const limits: Record<string, number> = {};
    for (const [key, name] of Object.entries(LIMIT_KEYS)) {
      const value = json[key];
      if (!Number.isSafeInteger(value) || value <= 0) {
        throw new Error(`dotllm_limits: "${key}" is ${JSON.stringify(value)}`);
      }
      limits[name] = value;
    }
    return this.#limits = Object.freeze(limits) as unknown as NativeLimits;
  }

  /** An ArrayBuffer over native memory, without copying. */
  view(address: number, byteLength: number): ArrayBuffer {
    return this.#adapter.view(address, byteLength);
  }

  /** Allocates `byteLength` zeroed bytes, 64-byte aligned. */
  alloc(byteLength: number): NativeBuffer {
    if (!Number.isSafeInteger(byteLength) || byteLength <= 0) {
      throw new RangeError(`Cannot allocate ${byteLength} bytes`);
    }
    const address = this.fn.dotllm_alloc(byteLength);
    if (address === 0) throw new RangeError(`Out of memory allocating ${byteLength} bytes`);
    return new NativeBuffer(this, address, byteLength);
  }

  /** Maps the file at `path` read-only; throws `Error("cannot open \"path\": ...")`. */
  mapFile(path: string): MappedFile {
    const pathBytes = new TextEncoder().encode(path);
    if (pathBytes.length === 0 || pathBytes.includes(0)) {
      throw new TypeError(`cannot open "${path}": bad path`);
    }
    using pathBuffer = this.alloc(pathBytes.length);
    pathBuffer.bytes().set(pathBytes);
    using out = this.alloc(16);
    const code = this.fn.dotllm_map_file(pathBuffer.address, pathBytes.length, out.address);
    if (code !== 0) {
      throw new Error(`cannot open "${path}": ${mapErrors[-code] ?? `error ${code}`}`);
    }
    const words = new BigUint64Array(out.buffer);
    return new MappedFile(this, path, Number(words[0]), Number(words[1]));
  }

  /** Closes the library; every buffer and mapping must be freed first. */
  close(): void {
    this.#adapter.close();
  }
}

/** Bits of `dotllm_cpu_features` (see `ffi/cpu.zig`). */
export const CpuFeature = {
  avx2: 1 << 0,
  avx512: 1 << 1,
  avx512vnni: 1 << 2,
  builtAvx512: 1 << 16,
} as const;

/**
 * Whether to load the AVX-512 build: `DOTLLM_CPU=baseline` says no,
 * `DOTLLM_CPU=avx512` says yes, otherwise the CPU's features decide.
 */
function wantAvx512(features: number): boolean {
  const forced = process.env.DOTLLM_CPU;
  const has = (features & CpuFeature.avx512) !== 0 && (features & CpuFeature.avx512vnni) !== 0;
  if (forced === "baseline") return false;
  if (forced === "avx512") {
    if (!has) throw new Error("DOTLLM_CPU=avx512, but this CPU has no AVX-512 VNNI");
    return true;
  }
  if (forced !== undefined && forced !== "" && forced !== "auto") {
    throw new TypeError(`DOTLLM_CPU must be auto, baseline or avx512, not "${forced}"`);
  }
  return has;
}

let loaded: Native | undefined;

/**
 * The process-wide native library, loaded on first use: the baseline build,
 * or the AVX-512 build where one ships and the CPU can run it.
 */
export function loadNative(): Native {
  if (loaded !== undefined) return loaded;
  const choice = locateLibrary();
  let native = new Native(choice.path);
  if (choice.avx512Path !== undefined && wantAvx512(native.fn.dotllm_cpu_features())) {
    native.close();
    native = new Native(choice.avx512Path);
  }
  loaded = native;
  return native;
}

/**
 * `quantizeFile`: llama-quantize's job on one GGUF file. The input is mapped
 * read-only; each tensor is copied (same type) or converted in slabs of rows
 * (dequantized to f32, then quantized) by the native library's
 * `dotllm_dequantize_row` / `dotllm_quantize_row`, checked as ggml checks it,
 * and streamed to `OUT.tmp-<pid>-<random>`, which is renamed to `OUT` only
 * when complete. On any failure the temporary file is removed and `OUT` is
 * untouched.
 *
 * @example
 * ```ts ignore
 * import { quantizeFile } from "./quantize.ts";
 * import { parseQuantType } from "./ftype.ts";
 * const result = quantizeFile("model-f32.gguf", "model-q4_k_m.gguf", {
 *   type: parseQuantType("Q4_K_M")!,
 * });
 * console.log(result.fileSizeBytes);
 * ```
 *
 * @module
 */
import {
  closeSync,
  fsyncSync,
  openSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import process from "node:process";
import { loadNative, type Native } from "../native/mod.ts";
import { GgufError, parseGguf } from "../gguf/reader.ts";
import {
  type Converters,
  type PlannedTensor,
  planQuantization,
  type QuantizationPlan,
  QuantizeError,
  type QuantizeOptions,
} from "./plan.ts";
import { findInvalidValue } from "./validate.ts";
import { type RowTask, RowWorkers } from "./row_workers.ts";

/** Threads used at most (a reason: more than the machine has only adds contention). */
const THREADS_MAX = 64;

/** Converts one task on this thread; the status as RowWorkers.convert reports it. */
function convertHere(native: Native, t: RowTask): number {
  if (native.fn.dotllm_dequantize_row(t.srcType, t.src, t.f32, t.n) !== 0) return -1;
  return native.fn.dotllm_quantize_row(t.dstType, t.f32, t.dst, t.n) !== 0 ? -2 : 0;
}

/** f32 elements converted per native call: bounds memory (64 MiB of f32 plus the output). */
const SLAB_ELEMENTS_MAX = 16 << 20;

/** Progress of a running quantization, reported after each slab. */
export interface QuantizeProgress {
  /** 0-based index of the tensor being written, and how many there are. */
  readonly tensorIndex: number;
  readonly tensorCount: number;
  readonly tensor: PlannedTensor;
  /** Input bytes processed so far, of all tensors, and their total. */
  readonly doneBytes: number;
  readonly totalBytes: number;
}

/** What was written. */
export interface QuantizeResult {
  readonly plan: QuantizationPlan;
  readonly fileSizeBytes: number;
}

/** Where the quantized bytes go: the default writes to a file descriptor. */
export interface ByteSink {
  write(bytes: Uint8Array): void;
}

/** The native row converters, probed once per type (`n = 0` says whether a type is computable). */
export function nativeConverters(native: Native): Converters {
  const probe = (fn: "dotllm_quantize_row" | "dotllm_dequantize_row", id: number) => {
    using scratch = native.alloc(64);
    return native.fn[fn](id, scratch.address, scratch.address, 0) === 0;
  };
  const q = new Map<number, boolean>();
  const d = new Map<number, boolean>();
  return {
    canQuantize(id) {
      if (!q.has(id)) q.set(id, probe("dotllm_quantize_row", id));
      return q.get(id)!;
    },
    canDequantize(id) {
      if (!d.has(id)) d.set(id, probe("dotllm_dequantize_row", id));
      return d.get(id)!;
    },
  };
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  if (error instanceof Error) {
    // Deno's node:fs errors name the errno in the message when code is absent.
    const m = /\b(E[A-Z]+)\b/.exec(error.message);
    if (m) return m[1];
    if (error.name === "NotFound") return "ENOENT";
    if (error.name === "PermissionDenied") return "EACCES";
  }
  return undefined;
}

function describeIoError(error: unknown): string {
  switch (errorCode(error)) {
    case "ENOSPC":
      return "no space left on device";
    case "EDQUOT":
      return "disk quota exceeded";
    case "ENOENT":
      return "no such file or directory";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "EISDIR":
      return "is a directory";
    case "EROFS":
      return "read-only file system";
    case "EEXIST":
      return "already exists";
  }
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0];
}

/**
 * Quantizes `inPath` into `outPath` as `options` says; returns the plan and
 * the size written. `threadCount` threads convert (default: one per CPU, as
 * llama-quantize; the bytes do not depend on it). An aborted `signal` stops it
 * between slabs (nothing is left at OUT). `io` replaces the file writes (tests use it to run out of
 * disk where they cannot mount a small file system). Throws {@linkcode QuantizeError} with a one-line message
 * naming the file or tensor for anything that goes wrong.
 */
export async function quantizeFile(
  inPath: string,
  outPath: string,
  options: QuantizeOptions & { threadCount?: number; signal?: AbortSignal },
  onProgress?: (progress: QuantizeProgress) => void,
  io: { writeSync: (fd: number, bytes: Uint8Array) => number } = { writeSync },
): Promise<QuantizeResult> {
  const native = loadNative();
  let mapped;
  try {
    mapped = native.mapFile(inPath);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new QuantizeError(
      `${inPath}: cannot open: ${message.replace(/^cannot open ".*": /s, "")}`,
    );
  }
  try {
    let gguf;
    try {
      gguf = parseGguf(mapped.bytes);
    } catch (error) {
      if (error instanceof GgufError) throw new QuantizeError(`${inPath}: ${error.message}`);
      throw error;
    }
    let plan: QuantizationPlan;
    try {
      plan = planQuantization(gguf, options, nativeConverters(native));
    } catch (error) {
      if (error instanceof QuantizeError) throw new QuantizeError(`${inPath}: ${error.message}`);
      throw error;
    }
    if (sameFile(inPath, outPath)) {
      throw new QuantizeError(`input and output are the same file: ${outPath}`);
    }
    // Refused before the work, not at the final rename.
    if (isDirectory(outPath)) throw new QuantizeError(`cannot write ${outPath}: is a directory`);
    const tmpPath = `${outPath}.tmp-${process.pid}-${
      Math.floor(Math.random() * 0x1_0000_0000).toString(16).padStart(8, "0")
    }`;
    let fd: number;
    try {
      fd = openSync(tmpPath, "wx");
    } catch (error) {
      throw new QuantizeError(`cannot create ${outPath}: ${describeIoError(error)}`);
    }
    let done = false;
    const threads = options.threadCount !== undefined && options.threadCount > 0
      ? options.threadCount
      : native.fn.dotllm_cpu_count();
    const needsConversion = plan.tensors.some((t) => t.from.id !== t.to.id);
    const workers = needsConversion
      ? await RowWorkers.start(native.path, Math.min(threads, THREADS_MAX) - 1)
      : undefined;
    try {
      const sink: ByteSink = {
        write(bytes) {
          let rest = bytes;
          while (rest.length > 0) rest = rest.subarray(io.writeSync(fd, rest));
        },
      };
      try {
        await writeQuantized(
          native,
          mapped.address,
          mapped.bytes,
          plan,
          sink,
          onProgress,
          workers,
          options.signal,
        );
        fsyncSync(fd);
      } catch (error) {
        if (error instanceof QuantizeError) {
          throw new QuantizeError(`${inPath}: ${error.message}`);
        }
        throw new QuantizeError(`cannot write ${outPath}: ${describeIoError(error)}`);
      }
      closeSync(fd);
      fd = -1;
      try {
        renameSync(tmpPath, outPath);
      } catch (error) {
        throw new QuantizeError(`cannot write ${outPath}: ${describeIoError(error)}`);
      }
      done = true;
    } finally {
      workers?.close();
      if (fd >= 0) closeSync(fd);
      if (!done) {
        try {
          unlinkSync(tmpPath);
        } catch { /* already gone */ }
      }
    }
    return { plan, fileSizeBytes: plan.fileSizeBytes };
  } finally {
    mapped.close();
  }
}

/**
 * The plan alone (`--dry-run`): what would be written, nothing read but the
 * header, and whether the native library can compute each type left unasked.
 */
export function planFile(inPath: string, options: QuantizeOptions): QuantizationPlan {
  const native = loadNative();
  let mapped;
  try {
    mapped = native.mapFile(inPath);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new QuantizeError(
      `${inPath}: cannot open: ${message.replace(/^cannot open ".*": /s, "")}`,
    );
  }
  try {
    const any = { canQuantize: () => true, canDequantize: () => true };
    return planQuantization(parseGguf(mapped.bytes), options, any);
  } catch (error) {
    if (error instanceof QuantizeError || error instanceof GgufError) {
      throw new QuantizeError(`${inPath}: ${error.message}`);
    }
    throw error;
  } finally {
    mapped.close();
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function sameFile(a: string, b: string): boolean {
  try {
    const sa = statSync(a);
    const sb = statSync(b);
    if (sa.ino !== 0 && sa.ino === sb.ino && sa.dev === sb.dev) return true;
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/**
 * Writes the plan's file to `sink`: the header, then each tensor (copied or
 * converted from the mapped input at `baseAddress` / `bytes`) and its padding.
 * Throws {@linkcode QuantizeError} for invalid input or output data; write
 * errors come from the sink as they are.
 */
export async function writeQuantized(
  native: Native,
  baseAddress: number,
  bytes: Uint8Array,
  plan: QuantizationPlan,
  sink: ByteSink,
  onProgress?: (progress: QuantizeProgress) => void,
  workers?: RowWorkers,
  signal?: AbortSignal,
): Promise<void> {
  sink.write(plan.header);
  const totalBytes = plan.tensors.reduce((a, t) => a + t.source.sizeBytes, 0);
  const zeros = new Uint8Array(plan.alignment);
  let doneBytes = 0;
  const maxSlab = Math.max(
    0,
    ...plan.tensors.filter((t) => t.from.id !== t.to.id).map((t) =>
      Math.max(1, Math.floor(SLAB_ELEMENTS_MAX / Math.max(1, t.rowElements))) * t.rowElements
    ),
  );
  // Sized for the largest slab any tensor needs (at least one row).
  const maxDstBytes = Math.max(
    0,
    ...plan.tensors.filter((t) => t.from.id !== t.to.id).map((t) =>
      Math.min(
        t.rowCount,
        Math.max(1, Math.floor(SLAB_ELEMENTS_MAX / Math.max(1, t.rowElements))),
      ) *
      (t.sizeBytes / Math.max(1, t.rowCount))
    ),
  );
  const f32 = maxSlab > 0 ? native.alloc(maxSlab * 4) : undefined;
  const dst = maxDstBytes > 0 ? native.alloc(maxDstBytes) : undefined;
  try {
    for (const [index, t] of plan.tensors.entries()) {
      const src = t.source;
      const report = (extra: number) =>
        onProgress?.({
          tensorIndex: index,
          tensorCount: plan.tensors.length,
          tensor: t,
          doneBytes: doneBytes + extra,
          totalBytes,
        });
      const what = `tensor ${JSON.stringify(t.name)}`;
      if (t.from.id === t.to.id) {
        const data = bytes.subarray(src.dataOffset, src.dataOffset + src.sizeBytes);
        const bad = findInvalidValue(src.type.id, data);
        if (bad !== undefined) throw new QuantizeError(`${what} has invalid data (${bad})`);
        sink.write(data);
      } else {
        const rowsPerSlab = Math.max(1, Math.floor(SLAB_ELEMENTS_MAX / Math.max(1, t.rowElements)));
        const srcRowBytes = src.sizeBytes / Math.max(1, t.rowCount);
        const dstRowBytes = t.sizeBytes / Math.max(1, t.rowCount);
        for (let row = 0; row < t.rowCount; row += rowsPerSlab) {
          if (signal !== undefined) {
            // A macrotask turn, so that a signal handler can run between slabs.
            await new Promise((resolve) => setTimeout(resolve, 0));
            if (signal.aborted) throw new QuantizeError("interrupted");
          }
          const rows = Math.min(rowsPerSlab, t.rowCount - row);
          const srcOffset = src.dataOffset + row * srcRowBytes;
          const srcBytes = bytes.subarray(srcOffset, srcOffset + rows * srcRowBytes);
          const bad = findInvalidValue(src.type.id, srcBytes);
          if (bad !== undefined) {
            throw new QuantizeError(`${what} has invalid data (row ${row} on: ${bad})`);
          }
          // Rows split in contiguous parts: one per worker, the first on this thread.
          const parts = Math.min(rows, 1 + (workers?.size ?? 0));
          const tasks: RowTask[] = [];
          for (let p = 0; p < parts; p++) {
            const r0 = Math.floor((rows * p) / parts);
            const r1 = Math.floor((rows * (p + 1)) / parts);
            tasks.push({
              srcType: src.type.id,
              src: baseAddress + srcOffset + r0 * srcRowBytes,
              dstType: t.to.id,
              f32: f32!.address + r0 * t.rowElements * 4,
              dst: dst!.address + r0 * dstRowBytes,
              n: (r1 - r0) * t.rowElements,
            });
          }
          const others = tasks.slice(1).map((task) => workers!.convert(task));
          const statuses = [convertHere(native, tasks[0]), ...await Promise.all(others)];
          if (statuses.includes(-1)) {
            throw new QuantizeError(`${what}: cannot dequantize ${src.type.name}`);
          }
          if (statuses.some((s) => s !== 0)) {
            throw new QuantizeError(`${what}: cannot quantize to ${t.to.name}`);
          }
          const out = dst!.bytes().subarray(0, rows * dstRowBytes);
          const invalid = findInvalidValue(t.to.id, out);
          if (invalid !== undefined) {
            throw new QuantizeError(
              `${what}: quantized data validation failed (${t.to.name}: ${invalid}; values too large?)`,
            );
          }
          sink.write(out);
          report((row + rows) * srcRowBytes);
        }
      }
      const pad = Math.ceil(t.sizeBytes / plan.alignment) * plan.alignment - t.sizeBytes;
      if (pad > 0) sink.write(zeros.subarray(0, pad));
      doneBytes += src.sizeBytes;
      report(0);
    }
  } finally {
    f32?.free();
    dst?.free();
  }
}

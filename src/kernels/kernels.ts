/**
 * The compute kernels and their thread pool, driven from TypeScript.
 *
 * Every pointer argument is a plain number address of native memory
 * (`NativeBuffer.address`, or `MappedFile.address + tensor.dataOffset`). Counts
 * are checked here before anything crosses into Zig; addresses cannot be checked
 * and are the caller's contract: each must point to as many bytes as its shape says.
 *
 * @example
 * ```ts
 * import { loadNative } from "../native/mod.ts";
 * import { Kernels } from "./kernels.ts";
 * import { GgmlType } from "../gguf/mod.ts";
 * const native = loadNative();
 * const kernels = new Kernels(native); // every CPU of the affinity mask
 * const w = native.alloc(4 * 8 * 4), x = native.alloc(8 * 4), out = native.alloc(4 * 4);
 * w.f32().fill(1);
 * x.f32().fill(2);
 * kernels.matmul(GgmlType.F32, out.address, w.address, x.address, 4, 8, 1);
 * console.log(out.f32()); // [16, 16, 16, 16]
 * kernels.close();
 * ```
 *
 * @module
 */
import { GgmlType } from "../gguf/types.ts";
import type { Native } from "../native/mod.ts";
import { GRAPH_ERRORS, GraphRecorder } from "./_graph.ts";
import { computableType } from "./types.ts";

function checkCount(name: string, value: number, min = 1): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  }
}

function checkAddress(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`${name} must be a native address, got ${value}`);
  }
}

function checkFinite(name: string, value: number): void {
  if (!Number.isFinite(value)) throw new RangeError(`${name} must be finite, got ${value}`);
}

/** The KV cache types (ffi/kv_types.zig; the model's `CACHE_TYPES` by ggml id). */
const CACHE_TYPE_IDS = new Set(
  (["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"] as const).map((n) =>
    GgmlType[n]
  ),
);

function checkCacheType(cacheType: number): void {
  if (!CACHE_TYPE_IDS.has(cacheType)) {
    throw new RangeError(`Unsupported KV cache type ${cacheType}`);
  }
}

/**
 * A pool of compute threads and the kernels that run on it. One per model is
 * typical; it is not safe to call from two JavaScript threads at once.
 *
 * Every kernel runs as a graph op (`ffi/graph.zig`): recorded between
 * {@linkcode beginGraph} and {@linkcode endGraph} and run in one native call, or,
 * outside a recording, run at once as a graph of one op. The library checks each op
 * again (types, counts, sizes, ids) and refuses a malformed one with an error.
 */
export class Kernels {
  #native: Native;
  #pool: number;
  #scratchBytes = 0;
  #graph: GraphRecorder;
  #single: GraphRecorder;
  #recording = false;
  /** The number of threads (the caller's plus the workers). */
  readonly threadCount: number;

  /**
   * Starts `threads - 1` worker threads (the calling thread is the last one).
   * `threads` 0 or undefined means every CPU in this process's affinity mask.
   */
  constructor(native: Native, threads = 0) {
    checkCount("threads", threads, 0);
    const threadCountMax = native.limits.threadCountMax;
    if (threads > threadCountMax) {
      throw new RangeError(`threads must be at most ${threadCountMax}, got ${threads}`);
    }
    this.#native = native;
    this.#graph = new GraphRecorder(native);
    this.#single = new GraphRecorder(native, 1);
    this.#pool = native.fn.dotllm_pool_create(threads);
    if (this.#pool === 0) {
      this.#graph.free();
      this.#single.free();
      throw new Error(`Cannot start a pool of ${threads} threads`);
    }
    this.threadCount = native.fn.dotllm_pool_thread_count(this.#pool);
  }

  /** The number of CPUs this process may run on (the default thread count). */
  static cpuCount(native: Native): number {
    return native.fn.dotllm_cpu_count();
  }

  get #handle(): number {
    if (this.#pool === 0) throw new Error("Kernels used after close");
    return this.#pool;
  }

  #run(graph: GraphRecorder): void {
    const status = this.#native.fn.dotllm_graph_run(this.#handle, graph.address, graph.count);
    graph.count = 0;
    if (status < 0) {
      throw new Error(`the native library refused a kernel op: ${GRAPH_ERRORS[status] ?? status}`);
    }
    if (status !== 0) {
      throw new Error("a native pool worker panicked (its message is on stderr)");
    }
  }

  /**
   * Starts recording: until {@linkcode endGraph}, kernel calls are checked and
   * queued instead of run, and `endGraph` runs them all in one native call.
   * Results are bit-identical to calling the kernels one by one. Outputs may be read
   * only after `endGraph`.
   */
  beginGraph(): void {
    if (this.#recording) throw new Error("beginGraph: already recording");
    this.#handle;
    this.#graph.count = 0;
    this.#recording = true;
  }

  /** Runs the recorded kernels and stops recording. */
  endGraph(): void {
    if (!this.#recording) throw new Error("endGraph without beginGraph");
    this.#recording = false;
    if (this.#graph.count > 0) this.#run(this.#graph);
  }

  /** Drops the recorded kernels and stops recording. */
  cancelGraph(): void {
    this.#recording = false;
    this.#graph.count = 0;
  }

  /** The recorder the next op goes to. */
  get #to(): GraphRecorder {
    this.#handle;
    return this.#recording ? this.#graph : this.#single;
  }

  /** Runs the op just recorded when not recording. */
  #done(): void {
    if (!this.#recording) this.#run(this.#single);
  }

  /**
   * Reserves the pool's scratch for matmuls of up to `maxTokens` × `maxCols`
   * activations (quantized activations, for every type). Call it at load time: a
   * direct matmul that needs more grows the scratch itself (an allocation); one
   * recorded in a graph is refused instead.
   */
  reserve(maxTokens: number, maxCols: number): void {
    checkCount("maxTokens", maxTokens);
    checkCount("maxCols", maxCols);
    const bytes = this.#native.fn.dotllm_matmul_scratch_bytes(maxCols, maxTokens);
    if (bytes <= this.#scratchBytes) return;
    if (this.#native.fn.dotllm_pool_reserve(this.#handle, bytes) !== 0) {
      throw new RangeError(`Out of memory reserving ${bytes} bytes of kernel scratch`);
    }
    this.#scratchBytes = bytes;
  }

  /**
   * `out[t][r] = Σ_c W[r][c] · x[t][c]`: W of any computable ggml type `type`,
   * `rows` × `cols` row-major (GGUF dims [cols, rows]); x [tokens][cols] f32;
   * out [tokens][rows] f32. `cols` must be a whole number of the type's blocks.
   */
  matmul(
    type: number,
    out: number,
    weight: number,
    x: number,
    rows: number,
    cols: number,
    tokens: number,
  ): void {
    checkAddress("out", out);
    checkAddress("weight", weight);
    checkAddress("x", x);
    checkCount("rows", rows);
    checkCount("cols", cols);
    checkCount("tokens", tokens);
    const t = computableType(this.#native, type);
    if (t === undefined) throw new RangeError(`Unsupported matmul weight type ${type}`);
    if (cols % t.blockElems !== 0) {
      throw new RangeError(`${t.name} matmul needs cols % ${t.blockElems} == 0, got ${cols}`);
    }
    if (!this.#recording) this.reserve(tokens, cols);
    this.#to.matmul(type, out, weight, x, rows, cols, tokens);
    this.#done();
  }

  /** `out[t] = x[t] / sqrt(mean(x[t]²) + eps) · weight`, n per token (out may equal x). */
  rmsnorm(out: number, x: number, weight: number, n: number, tokens: number, eps: number): void {
    checkAddress("out", out);
    checkAddress("x", x);
    checkAddress("weight", weight);
    checkCount("n", n);
    checkCount("tokens", tokens);
    checkFinite("eps", eps);
    this.#to.rmsnorm(out, x, weight, n, tokens, eps);
    this.#done();
  }

  /**
   * In-place RoPE on x[tokens][heads][headDim], token t at position `positions[t]`
   * (`positions`: the address of `tokens` i32). The first `ropeDims` of each head
   * rotate by θ_i = pos · freqBase^(-2i/ropeDims) / freqFactors[i]. `neox` false
   * rotates (x[2i], x[2i+1]) (llama); true rotates (x[i], x[i + ropeDims/2]).
   * `freqFactors` is 0 or the address of ropeDims/2 f32.
   */
  rope(
    x: number,
    tokens: number,
    heads: number,
    headDim: number,
    ropeDims: number,
    positions: number,
    freqBase: number,
    freqFactors: number,
    neox: boolean,
  ): void {
    checkAddress("x", x);
    checkCount("tokens", tokens);
    checkCount("heads", heads);
    checkCount("headDim", headDim);
    checkCount("ropeDims", ropeDims, 2);
    checkAddress("positions", positions);
    const headDimMax = this.#native.limits.headDimMax;
    if (headDim > headDimMax) {
      throw new RangeError(`headDim must be at most ${headDimMax}, got ${headDim}`);
    }
    if (ropeDims % 2 !== 0 || ropeDims > headDim) {
      throw new RangeError(`ropeDims must be even and <= headDim ${headDim}, got ${ropeDims}`);
    }
    if (!(freqBase > 0) || !Number.isFinite(freqBase)) {
      throw new RangeError(`freqBase must be positive, got ${freqBase}`);
    }
    if (freqFactors !== 0) checkAddress("freqFactors", freqFactors);
    this.#to.rope(x, positions, tokens, heads, headDim, ropeDims, freqFactors, neox, freqBase);
    this.#done();
  }

  /**
   * Writes row t of `src` ([tokens][kvDim] f32) into cache row
   * `slots[t]·slotRows + positions[t] % slotRows` of a cache of `cacheType` (F32 or
   * F16) holding `slotCount` slots (`positions`, `slots`: addresses of `tokens` i32).
   */
  storeKv(
    cacheType: number,
    cache: number,
    src: number,
    positions: number,
    slots: number,
    tokens: number,
    kvDim: number,
    slotRows: number,
    slotCount: number,
  ): void {
    checkAddress("cache", cache);
    checkAddress("src", src);
    checkAddress("positions", positions);
    checkAddress("slots", slots);
    checkCount("tokens", tokens);
    checkCount("kvDim", kvDim);
    checkCount("slotRows", slotRows);
    checkCount("slotCount", slotCount);
    checkCacheType(cacheType);
    this.#to.storeKv(cacheType, cache, src, positions, slots, tokens, kvDim, slotRows, slotCount);
    this.#done();
  }

  /**
   * Attention of q [tokens][heads·headDim] f32 (roped) over caches of `cacheType`
   * laid out as {@linkcode storeKv} writes them: token t attends its own slot's
   * positions [window > 0 ? max(0, pos − window + 1) : 0, pos], pos = positions[t].
   * out [tokens][heads·headDim] f32. `alone`: every token in the order of a
   * token decoded alone, though its sequence has others in the batch.
   */
  attention(
    cacheType: number,
    out: number,
    q: number,
    kCache: number,
    vCache: number,
    tokens: number,
    positions: number,
    slots: number,
    heads: number,
    kvHeads: number,
    headDim: number,
    scale: number,
    slotRows: number,
    window: number,
    slotCount: number,
    vCacheType: number = cacheType,
    alone = false,
  ): void {
    checkAddress("out", out);
    checkAddress("q", q);
    checkAddress("kCache", kCache);
    checkAddress("vCache", vCache);
    checkCount("tokens", tokens);
    checkAddress("positions", positions);
    checkAddress("slots", slots);
    checkCount("heads", heads);
    checkCount("kvHeads", kvHeads);
    checkCount("headDim", headDim);
    checkFinite("scale", scale);
    checkCount("slotRows", slotRows);
    checkCount("slotCount", slotCount);
    checkCount("window", window, 0);
    if (heads % kvHeads !== 0) {
      throw new RangeError(`heads ${heads} must be a multiple of kvHeads ${kvHeads}`);
    }
    const headDimMax = this.#native.limits.headDimMax;
    if (headDim > headDimMax) {
      throw new RangeError(`headDim must be at most ${headDimMax}, got ${headDim}`);
    }
    checkCacheType(cacheType);
    checkCacheType(vCacheType);
    this.#to.attention(
      cacheType,
      out,
      q,
      kCache,
      vCache,
      positions,
      slots,
      tokens,
      heads,
      kvHeads,
      headDim,
      slotRows,
      slotCount,
      window,
      scale,
      vCacheType,
      alone,
    );
    this.#done();
  }

  /** `out[i] = silu(gate[i]) · up[i]` for n elements. */
  swiglu(out: number, gate: number, up: number, n: number): void {
    checkAddress("out", out);
    checkAddress("gate", gate);
    checkAddress("up", up);
    checkCount("n", n);
    this.#to.swiglu(out, gate, up, n);
    this.#done();
  }

  /** `out[i] = gelu_tanh(gate[i]) · up[i]` for n elements (ggml's F16-table GELU). */
  geglu(out: number, gate: number, up: number, n: number): void {
    checkAddress("out", out);
    checkAddress("gate", gate);
    checkAddress("up", up);
    checkCount("n", n);
    this.#to.geglu(out, gate, up, n);
    this.#done();
  }

  /** `out[r][i] = x[r][i] + bias[i]` for `rows` rows of `n` (out may alias x). */
  addRows(out: number, x: number, bias: number, rows: number, n: number): void {
    checkAddress("out", out);
    checkAddress("x", x);
    checkAddress("bias", bias);
    checkCount("rows", rows);
    checkCount("n", n);
    this.#to.addRows(out, x, bias, rows, n);
    this.#done();
  }

  /** `out[i] = gelu_tanh(x[i])` for n elements (ggml's F16-table GELU; out may alias x). */
  gelu(out: number, x: number, n: number): void {
    checkAddress("out", out);
    checkAddress("x", x);
    checkCount("n", n);
    this.#to.gelu(out, x, n);
    this.#done();
  }

  /**
   * Layer norm with weight and bias: `out[t] = (x[t] − mean) / √(var + eps) · weight + bias`
   * for `tokens` rows of `n` (out may alias x).
   */
  layerNorm(
    out: number,
    x: number,
    weight: number,
    bias: number,
    n: number,
    tokens: number,
    eps: number,
  ): void {
    checkAddress("out", out);
    checkAddress("x", x);
    checkAddress("weight", weight);
    checkAddress("bias", bias);
    checkCount("n", n);
    checkCount("tokens", tokens);
    checkFinite("eps", eps);
    if (eps < 0) throw new RangeError(`eps must be >= 0, got ${eps}`);
    this.#to.norm(out, x, weight, bias, n, tokens, eps);
    this.#done();
  }

  /** `out[i] = x[i] · s` for n elements (out may alias x). */
  scale(out: number, x: number, s: number, n: number): void {
    checkAddress("out", out);
    checkAddress("x", x);
    checkCount("n", n);
    if (!Number.isFinite(s)) throw new RangeError(`scale must be finite, got ${s}`);
    this.#to.scale(out, x, n, s);
    this.#done();
  }

  /**
   * Rotates `rows` runs of `n` f32 values at `x` in place by the orthonormal
   * Walsh-Hadamard matrix (n a power of two, at most the largest head): llama.cpp's
   * rotation around a quantized KV cache.
   */
  hadamard(x: number, rows: number, n: number): void {
    checkAddress("x", x);
    checkCount("rows", rows);
    if (
      !Number.isInteger(n) || n < 2 || (n & (n - 1)) !== 0 || n > this.#native.limits.headDimMax
    ) {
      throw new RangeError(
        `n must be a power of two in [2, ${this.#native.limits.headDimMax}], got ${n}`,
      );
    }
    this.#to.hadamard(x, rows, n);
    this.#done();
  }

  /** `out[i] = a[i] + b[i]` for n elements (out may alias a). */
  add(out: number, a: number, b: number, n: number): void {
    checkAddress("out", out);
    checkAddress("a", a);
    checkAddress("b", b);
    checkCount("n", n);
    this.#to.add(out, a, b, n);
    this.#done();
  }

  /**
   * Row lookup: row `ids[i]` (count i32 ids at `ids`) of `table` (type `type`,
   * rowCount rows of rowLength elements) converted to f32 into out[i]. The library
   * checks every id against rowCount before anything runs.
   */
  getRows(
    type: number,
    out: number,
    table: number,
    ids: number,
    count: number,
    rowLength: number,
    rowCount: number,
  ): void {
    checkAddress("out", out);
    checkAddress("table", table);
    checkAddress("ids", ids);
    checkCount("count", count);
    checkCount("rowLength", rowLength);
    checkCount("rowCount", rowCount);
    const t = computableType(this.#native, type);
    if (t === undefined) throw new RangeError(`Unsupported row type ${type}`);
    if (rowLength % t.blockElems !== 0) {
      throw new RangeError(
        `${t.name} rows need rowLength % ${t.blockElems} == 0, got ${rowLength}`,
      );
    }
    this.#to.getRows(type, out, table, ids, count, rowLength, rowCount);
    this.#done();
  }

  /** Dispatches an empty job to every thread and joins (benchmarks the pool). */
  noop(): void {
    const status = this.#native.fn.dotllm_pool_noop(this.#handle);
    if (status !== 0) throw new Error("a native pool worker panicked (its message is on stderr)");
  }

  /** Stops and joins the workers. Later calls throw; closing twice is a no-op. */
  close(): void {
    if (this.#pool === 0) return;
    this.#graph.free();
    this.#single.free();
    this.#native.fn.dotllm_pool_destroy(this.#pool);
    this.#pool = 0;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

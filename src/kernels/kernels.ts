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
 * import { Kernels, WeightType } from "./kernels.ts";
 * const native = loadNative();
 * const kernels = new Kernels(native); // every CPU of the affinity mask
 * const w = native.alloc(4 * 8 * 4), x = native.alloc(8 * 4), out = native.alloc(4 * 4);
 * w.f32().fill(1);
 * x.f32().fill(2);
 * kernels.matmul(WeightType.F32, out.address, w.address, x.address, 4, 8, 1);
 * console.log(out.f32()); // [16, 16, 16, 16]
 * kernels.close();
 * ```
 *
 * @module
 */
import type { Native } from "../native/mod.ts";
import { GraphRecorder, OpCode } from "./_graph.ts";

/** ggml ids of the weight and cache types the kernels compute with. */
export const WeightType = {
  F32: 0,
  F16: 1,
  Q8_0: 8,
  BF16: 30,
} as const;

/** Elements per Q8_0 block. */
export const Q8_0_BLOCK = 32;
/** Bytes per Q8_0 block (f16 scale + 32 bytes). */
export const Q8_0_BLOCK_BYTES = 34;
/** Most threads a pool may have (as `ffi/pool.zig`). */
export const THREAD_COUNT_MAX = 256;
/** Largest head dimension RoPE and attention accept (as `ffi/kernels.zig`). */
export const HEAD_DIM_MAX = 512;
/** Scratch bytes per 32 activations the Q8_0 matmul quantizes (quants, correction, scale). */
const Q8_ACTIVATION_BLOCK_BYTES = 68;

/** Scratch bytes of a Q8_0 matmul (as `q8ScratchSize` in `ffi/matmul.zig`: blocks padded to even). */
export function q8ScratchBytes(tokens: number, cols: number): number {
  const blocks = Math.floor(cols / Q8_0_BLOCK);
  return tokens * (blocks + (blocks & 1)) * Q8_ACTIVATION_BLOCK_BYTES;
}

/** Bytes of `count` elements of weight type `type` (Q8_0: count must be a multiple of 32). */
export function weightBytes(type: number, count: number): number {
  switch (type) {
    case WeightType.F32:
      return count * 4;
    case WeightType.F16:
    case WeightType.BF16:
      return count * 2;
    case WeightType.Q8_0:
      return (count / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES;
    default:
      throw new RangeError(`Unsupported weight type ${type}`);
  }
}

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

/**
 * A pool of compute threads and the kernels that run on it. One per model is
 * typical; it is not safe to call from two JavaScript threads at once.
 */
export class Kernels {
  #native: Native;
  #pool: number;
  #scratchBytes = 0;
  #graph: GraphRecorder | undefined;
  #recording = false;
  /** The number of threads (the caller's plus the workers). */
  readonly threadCount: number;

  /**
   * Starts `threads - 1` worker threads (the calling thread is the last one).
   * `threads` 0 or undefined means every CPU in this process's affinity mask.
   */
  constructor(native: Native, threads = 0) {
    checkCount("threads", threads, 0);
    if (threads > THREAD_COUNT_MAX) {
      throw new RangeError(`threads must be at most ${THREAD_COUNT_MAX}, got ${threads}`);
    }
    this.#native = native;
    this.#pool = native.fn.dotllm_pool_create(threads);
    if (this.#pool === 0) throw new Error(`Cannot start a pool of ${threads} threads`);
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

  #check(status: number): void {
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
    this.#graph ??= new GraphRecorder(this.#native);
    this.#graph.count = 0;
    this.#recording = true;
  }

  /** Runs the recorded kernels and stops recording. */
  endGraph(): void {
    if (!this.#recording) throw new Error("endGraph without beginGraph");
    this.#recording = false;
    const graph = this.#graph!;
    if (graph.count === 0) return;
    const status = this.#native.fn.dotllm_graph_run(this.#handle, graph.address, graph.count);
    if (status < 0) throw new Error("dotllm_graph_run refused an op (a recorder bug)");
    this.#check(status);
  }

  /** Drops the recorded kernels and stops recording. */
  cancelGraph(): void {
    this.#recording = false;
  }

  /** The recorder while recording (kernel calls are queued to it), else undefined. */
  get #recorder(): GraphRecorder | undefined {
    return this.#recording ? this.#graph : undefined;
  }

  /**
   * Reserves the pool's scratch for Q8_0 matmuls of up to `maxTokens` × `maxCols`
   * activations. Call it at load time: a matmul that needs more grows the scratch
   * itself (an allocation), never one that fits.
   */
  reserve(maxTokens: number, maxCols: number): void {
    checkCount("maxTokens", maxTokens);
    checkCount("maxCols", maxCols);
    const bytes = q8ScratchBytes(maxTokens, maxCols);
    if (bytes <= this.#scratchBytes) return;
    if (this.#native.fn.dotllm_pool_reserve(this.#handle, bytes) !== 0) {
      throw new RangeError(`Out of memory reserving ${bytes} bytes of kernel scratch`);
    }
    this.#scratchBytes = bytes;
  }

  /**
   * `out[t][r] = Σ_c W[r][c] · x[t][c]`: W of weight type `type` (F32, F16, BF16,
   * Q8_0), `rows` × `cols` row-major (GGUF dims [cols, rows]); x [tokens][cols] f32;
   * out [tokens][rows] f32. Q8_0 needs `cols % 32 == 0`.
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
    if (type === WeightType.Q8_0) {
      if (cols % Q8_0_BLOCK !== 0) {
        throw new RangeError(`Q8_0 matmul needs cols % 32 == 0, got ${cols}`);
      }
      if (q8ScratchBytes(tokens, cols) > this.#scratchBytes) {
        this.reserve(tokens, cols);
      }
    } else if (type !== WeightType.F32 && type !== WeightType.F16 && type !== WeightType.BF16) {
      throw new RangeError(`Unsupported matmul weight type ${type}`);
    }
    const recorder = this.#recorder;
    if (recorder) return recorder.push(OpCode.matmul, type, out, weight, x, rows, cols, tokens);
    const fn = this.#native.fn;
    const pool = this.#handle;
    switch (type) {
      case WeightType.F32:
        return this.#check(fn.dotllm_matmul_f32(pool, out, weight, x, rows, cols, tokens));
      case WeightType.F16:
        return this.#check(fn.dotllm_matmul_f16(pool, out, weight, x, rows, cols, tokens));
      case WeightType.BF16:
        return this.#check(fn.dotllm_matmul_bf16(pool, out, weight, x, rows, cols, tokens));
      default:
        return this.#check(fn.dotllm_matmul_q8_0(pool, out, weight, x, rows, cols, tokens));
    }
  }

  /** `out[t] = x[t] / sqrt(mean(x[t]²) + eps) · weight`, n per token (out may equal x). */
  rmsnorm(out: number, x: number, weight: number, n: number, tokens: number, eps: number): void {
    checkAddress("out", out);
    checkAddress("x", x);
    checkAddress("weight", weight);
    checkCount("n", n);
    checkCount("tokens", tokens);
    checkFinite("eps", eps);
    const recorder = this.#recorder;
    if (recorder) {
      recorder.push(OpCode.rmsnorm, 0, out, x, weight, n, tokens);
      return recorder.setF32(5, eps);
    }
    this.#check(this.#native.fn.dotllm_rmsnorm_f32(this.#handle, out, x, weight, n, tokens, eps));
  }

  /**
   * In-place RoPE on x[tokens][heads][headDim] at positions posStart + t. The first
   * `ropeDims` of each head rotate by θ_i = pos · freqBase^(-2i/ropeDims) / freqFactors[i].
   * `neox` false rotates (x[2i], x[2i+1]) (llama); true rotates (x[i], x[i + ropeDims/2]).
   * `freqFactors` is 0 or the address of ropeDims/2 f32.
   */
  #ropeAt(
    x: number,
    tokens: number,
    heads: number,
    headDim: number,
    ropeDims: number,
    posStart: number,
    freqBase: number,
    freqFactors: number,
    neox: boolean,
  ): void {
    checkAddress("x", x);
    checkCount("tokens", tokens);
    checkCount("heads", heads);
    checkCount("headDim", headDim);
    checkCount("ropeDims", ropeDims, 2);
    checkCount("posStart", posStart, 0);
    if (headDim > HEAD_DIM_MAX) {
      throw new RangeError(`headDim must be at most ${HEAD_DIM_MAX}, got ${headDim}`);
    }
    if (ropeDims % 2 !== 0 || ropeDims > headDim) {
      throw new RangeError(`ropeDims must be even and <= headDim ${headDim}, got ${ropeDims}`);
    }
    if (!(freqBase > 0) || !Number.isFinite(freqBase)) {
      throw new RangeError(`freqBase must be positive, got ${freqBase}`);
    }
    if (freqFactors !== 0) checkAddress("freqFactors", freqFactors);
    const recorder = this.#recorder;
    if (recorder) {
      const mode = neox ? 1 : 0;
      recorder.push(
        OpCode.rope,
        0,
        x,
        tokens,
        heads,
        headDim,
        ropeDims,
        posStart,
        0,
        freqFactors,
        mode,
      );
      return recorder.setF32(6, freqBase);
    }
    this.#check(
      this.#native.fn.dotllm_rope_f32(
        this.#handle,
        x,
        tokens,
        heads,
        headDim,
        ropeDims,
        posStart,
        freqBase,
        freqFactors,
        neox ? 1 : 0,
      ),
    );
  }

  /**
   * Writes `tokens` rows of kvDim f32 from `src` into rows [pos, pos + tokens) of a
   * cache of `cacheType` (F32 or F16).
   */
  #storeKvAt(
    cacheType: number,
    cache: number,
    src: number,
    pos: number,
    tokens: number,
    kvDim: number,
  ): void {
    checkAddress("cache", cache);
    checkAddress("src", src);
    checkCount("pos", pos, 0);
    checkCount("tokens", tokens);
    checkCount("kvDim", kvDim);
    if (cacheType !== WeightType.F32 && cacheType !== WeightType.F16) {
      throw new RangeError(`Unsupported KV cache type ${cacheType}`);
    }
    const recorder = this.#recorder;
    if (recorder) return recorder.push(OpCode.storeKv, cacheType, cache, src, pos, tokens, kvDim);
    const fn = this.#native.fn;
    if (cacheType === WeightType.F32) fn.dotllm_store_kv_f32(cache, src, pos, tokens, kvDim);
    else if (cacheType === WeightType.F16) fn.dotllm_store_kv_f16(cache, src, pos, tokens, kvDim);
    else throw new RangeError(`Unsupported KV cache type ${cacheType}`);
  }

  /**
   * Causal attention: q [tokens][heads·headDim] f32 (roped); kCache, vCache
   * [ctx][kvHeads·headDim] of `cacheType` holding positions 0 .. posStart+tokens-1;
   * token t sees positions 0 ..= posStart + t. out [tokens][heads·headDim] f32.
   */
  #attentionAt(
    cacheType: number,
    out: number,
    q: number,
    kCache: number,
    vCache: number,
    tokens: number,
    posStart: number,
    heads: number,
    kvHeads: number,
    headDim: number,
    scale: number,
  ): void {
    checkAddress("out", out);
    checkAddress("q", q);
    checkAddress("kCache", kCache);
    checkAddress("vCache", vCache);
    checkCount("tokens", tokens);
    checkCount("posStart", posStart, 0);
    checkCount("heads", heads);
    checkCount("kvHeads", kvHeads);
    checkCount("headDim", headDim);
    checkFinite("scale", scale);
    if (heads % kvHeads !== 0) {
      throw new RangeError(`heads ${heads} must be a multiple of kvHeads ${kvHeads}`);
    }
    if (headDim > HEAD_DIM_MAX) {
      throw new RangeError(`headDim must be at most ${HEAD_DIM_MAX}, got ${headDim}`);
    }
    if (cacheType !== WeightType.F32 && cacheType !== WeightType.F16) {
      throw new RangeError(`Unsupported KV cache type ${cacheType}`);
    }
    const recorder = this.#recorder;
    if (recorder) {
      const code = OpCode.attention;
      recorder.push(
        code,
        cacheType,
        out,
        q,
        kCache,
        vCache,
        tokens,
        posStart,
        heads,
        kvHeads,
        headDim,
      );
      return recorder.setF32(9, scale);
    }
    const fn = this.#native.fn;
    const pool = this.#handle;
    const args = [
      out,
      q,
      kCache,
      vCache,
      tokens,
      posStart,
      heads,
      kvHeads,
      headDim,
      scale,
    ] as const;
    if (cacheType === WeightType.F32) this.#check(fn.dotllm_attention_f32(pool, ...args));
    else if (cacheType === WeightType.F16) this.#check(fn.dotllm_attention_f16(pool, ...args));
    else throw new RangeError(`Unsupported KV cache type ${cacheType}`);
  }

  // ---- TEMPORARY adapter (issue 10): the positions/slots ABI of
  // `src/model/kernels.ts` over today's pos_start kernels, one call per run of
  // consecutive positions of one slot. The lead replaces it with the native
  // positions/slots ops; keep it small.
  /** i32 views of native arrays by address (no view allocated per call in the decode loop). */
  #views = new Map<number, Int32Array>();

  /** A view of `count` i32 at `address`, cached (the caller vouches for the extent). */
  #ints(address: number, count: number): Int32Array {
    const cached = this.#views.get(address);
    if (cached !== undefined && cached.length >= count) return cached;
    if (this.#views.size >= 64) this.#views.clear(); // bound the cache (tests make many buffers)
    const view = new Int32Array(this.#native.view(address, count * 4));
    this.#views.set(address, view);
    return view;
  }

  /** Tokens from `t` on with the same slot and consecutive positions (TEMPORARY adapter). */
  #run(pos: Int32Array, slots: Int32Array, t: number, tokens: number, slotRows: number): number {
    let end = t + 1;
    while (end < tokens && slots[end] === slots[t] && pos[end] === pos[end - 1] + 1) end++;
    if (pos[t] < 0 || pos[end - 1] >= slotRows || slots[t] < 0) {
      throw new RangeError(
        `positions ${pos[t]}..${pos[end - 1]} outside the slot's ${slotRows} rows`,
      );
    }
    return end;
  }

  /** RoPE of token t at position `positions[t]` (i32 array). TEMPORARY adapter. */
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
    const pos = this.#ints(positions, tokens);
    for (let t = 0, end = 0; t < tokens; t = end) {
      end = t + 1;
      while (end < tokens && pos[end] === pos[end - 1] + 1) end++;
      const at = t === 0 ? x : x + t * heads * headDim * 4; // (no new double in decode)
      this.#ropeAt(at, end - t, heads, headDim, ropeDims, pos[t], freqBase, freqFactors, neox);
    }
  }

  /** Token t's K or V to row `slots[t]·slotRows + positions[t]`. TEMPORARY adapter. */
  storeKv(
    cacheType: number,
    cache: number,
    src: number,
    positions: number,
    slots: number,
    tokens: number,
    kvDim: number,
    slotRows: number,
  ): void {
    const pos = this.#ints(positions, tokens), sl = this.#ints(slots, tokens);
    const rowBytes = kvDim * (cacheType === WeightType.F16 ? 2 : 4);
    for (let t = 0, end = 0; t < tokens; t = end) {
      end = this.#run(pos, sl, t, tokens, slotRows);
      const slotCache = sl[t] === 0 ? cache : cache + sl[t] * slotRows * rowBytes;
      const from = t === 0 ? src : src + t * kvDim * 4;
      this.#storeKvAt(cacheType, slotCache, from, pos[t], end - t, kvDim);
    }
  }

  /** Causal attention within each token's slot (window 0 only). TEMPORARY adapter. */
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
  ): void {
    const pos = this.#ints(positions, tokens), sl = this.#ints(slots, tokens);
    // A window cuts nothing while every position is below it.
    for (let t = 0; window > 0 && t < tokens; t++) {
      if (pos[t] >= window) {
        throw new RangeError("sliding-window attention needs the native positions ABI");
      }
    }
    const slotBytes = slotRows * kvHeads * headDim * (cacheType === WeightType.F16 ? 2 : 4);
    const rowBytes = heads * headDim * 4;
    for (let t = 0, end = 0; t < tokens; t = end) {
      end = this.#run(pos, sl, t, tokens, slotRows);
      const first = sl[t] === 0, n = end - t;
      const k = first ? kCache : kCache + sl[t] * slotBytes;
      const v = first ? vCache : vCache + sl[t] * slotBytes;
      this.#attentionAt(
        cacheType,
        t === 0 ? out : out + t * rowBytes,
        t === 0 ? q : q + t * rowBytes,
        k,
        v,
        n,
        pos[t],
        heads,
        kvHeads,
        headDim,
        scale,
      );
    }
  }
  // ---- end of the TEMPORARY adapter.

  /** `out[i] = silu(gate[i]) · up[i]` for n elements. */
  swiglu(out: number, gate: number, up: number, n: number): void {
    checkAddress("out", out);
    checkAddress("gate", gate);
    checkAddress("up", up);
    checkCount("n", n);
    const recorder = this.#recorder;
    if (recorder) return recorder.push(OpCode.swiglu, 0, out, gate, up, n);
    this.#check(this.#native.fn.dotllm_swiglu_f32(this.#handle, out, gate, up, n));
  }

  /** `out[i] = a[i] + b[i]` for n elements (out may alias a). */
  add(out: number, a: number, b: number, n: number): void {
    checkAddress("out", out);
    checkAddress("a", a);
    checkAddress("b", b);
    checkCount("n", n);
    const recorder = this.#recorder;
    if (recorder) return recorder.push(OpCode.add, 0, out, a, b, n);
    this.#check(this.#native.fn.dotllm_add_f32(this.#handle, out, a, b, n));
  }

  /**
   * Embedding lookup: row `ids[i]` (count i32 ids at `ids`) of `table` (type `type`,
   * rowCount rows of rowLength elements) converted to f32 into out[i]. The ids are
   * read and checked against rowCount here, before the native call.
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
    const idView = this.#ints(ids, count);
    for (let i = 0; i < count; i++) {
      const id = idView[i];
      if (id < 0 || id >= rowCount) {
        throw new RangeError(`Token id ${id} is outside the table's ${rowCount} rows`);
      }
    }
    if (type === WeightType.Q8_0 && rowLength % Q8_0_BLOCK !== 0) {
      throw new RangeError(`Q8_0 rows need rowLength % 32 == 0, got ${rowLength}`);
    }
    if (
      type !== WeightType.F32 && type !== WeightType.F16 && type !== WeightType.BF16 &&
      type !== WeightType.Q8_0
    ) {
      throw new RangeError(`Unsupported embedding type ${type}`);
    }
    const recorder = this.#recorder;
    if (recorder) return recorder.push(OpCode.getRows, type, out, table, ids, count, rowLength);
    const fn = this.#native.fn;
    switch (type) {
      case WeightType.F32:
        return fn.dotllm_get_rows_f32(out, table, ids, count, rowLength);
      case WeightType.F16:
        return fn.dotllm_get_rows_f16(out, table, ids, count, rowLength);
      case WeightType.BF16:
        return fn.dotllm_get_rows_bf16(out, table, ids, count, rowLength);
      default:
        return fn.dotllm_get_rows_q8_0(out, table, ids, count, rowLength);
    }
  }

  /** In-place softmax over n f32. */
  softmax(x: number, n: number): void {
    checkAddress("x", x);
    checkCount("n", n);
    if (this.#recording) throw new Error("softmax is not recorded in graphs");
    this.#native.fn.dotllm_softmax_f32(x, n);
  }

  /** Dispatches an empty job to every thread and joins (benchmarks the pool). */
  noop(): void {
    this.#check(this.#native.fn.dotllm_pool_noop(this.#handle));
  }

  /** Stops and joins the workers. Later calls throw; closing twice is a no-op. */
  close(): void {
    if (this.#pool === 0) return;
    this.#graph?.free();
    this.#graph = undefined;
    this.#native.fn.dotllm_pool_destroy(this.#pool);
    this.#pool = 0;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

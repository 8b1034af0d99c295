/**
 * Records kernel calls as ops (see `ffi/graph.zig`) into a native buffer, to run
 * them all with one `dotllm_graph_run`.
 *
 * Each op's fields are named here in the order of its Zig `extern struct`; at load
 * the names are checked against the library's own layout (`dotllm_op_schema`), so
 * an op encoder and its struct cannot drift apart unnoticed.
 *
 * @module
 */
import type { Native, NativeBuffer } from "../native/mod.ts";

/** Bytes of one op: code and type (u32 each), then 15 eight-byte fields. */
const OP_BYTES = 128;
const OP_WORDS = OP_BYTES / 4;

/** Every op's fields, in struct order; `:f64` marks a real, anything else is a u64. */
const OPS = {
  matmul: ["out", "weight", "x", "rows", "cols", "tokens"],
  rmsnorm: ["out", "x", "weight", "n", "tokens", "eps:f64"],
  rope: [
    "x",
    "positions",
    "tokens",
    "heads",
    "head_dim",
    "rope_dims",
    "freq_factors",
    "neox",
    "freq_base:f64",
  ],
  store_kv: ["cache", "src", "positions", "slots", "tokens", "kv_dim", "slot_rows", "slot_count"],
  attention: [
    "out",
    "q",
    "k",
    "v",
    "positions",
    "slots",
    "tokens",
    "heads",
    "kv_heads",
    "head_dim",
    "slot_rows",
    "slot_count",
    "window",
    "scale:f64",
    "mode",
  ],
  swiglu: ["out", "gate", "up", "n"],
  add: ["out", "a", "b", "n"],
  get_rows: ["out", "table", "ids", "count", "row_length", "row_count"],
  geglu: ["out", "gate", "up", "n"],
  add_rows: ["out", "x", "bias", "rows", "n"],
  scale: ["out", "x", "n", "s:f64"],
  gelu: ["out", "x", "n"],
  norm: ["out", "x", "weight", "bias", "n", "tokens", "eps:f64"],
  hadamard: ["x", "rows", "n"],
} as const;

/** An op's name. */
export type OpName = keyof typeof OPS;

type FieldName<S extends string> = S extends `${infer N}:${string}` ? N : S;
type FieldIndex = { readonly [K in OpName]: Record<FieldName<(typeof OPS)[K][number]>, number> };

/** Each op's field indices by name (`F.matmul.rows === 3`). */
const F = Object.fromEntries(
  Object.entries(OPS).map(([op, fields]) => [
    op,
    Object.fromEntries(fields.map((f, i) => [f.split(":")[0], i])),
  ]),
) as unknown as FieldIndex;

/** Why `dotllm_graph_run` refused a graph (its negated result; `GraphError` in Zig). */
export const GRAPH_ERRORS: Readonly<Record<number, string>> = {
  [-1]: "unknown op code",
  [-2]: "type not valid for the op",
  [-3]: "count out of range or size overflow",
  [-4]: "null or misaligned address",
  [-5]: "position, slot or row id out of range",
  [-6]: "kernel scratch too small",
  [-7]: "too many ops",
};

/** Op codes by name, read from the library and checked against {@linkcode OPS}. */
function opCodes(native: Native): Record<OpName, number> {
  const capacity = 1 << 14;
  using buffer = native.alloc(capacity);
  const length = native.fn.dotllm_op_schema(buffer.address, capacity);
  if (length > capacity) throw new Error("dotllm_op_schema: schema larger than expected");
  const schema = JSON.parse(new TextDecoder().decode(buffer.bytes().subarray(0, length))) as Record<
    string,
    { code: number; fields: string[] }
  >;
  const codes = {} as Record<OpName, number>;
  for (const [name, fields] of Object.entries(OPS) as [OpName, readonly string[]][]) {
    const native_ = schema[name];
    const expected = fields.map((f) => f.includes(":") ? f : `${f}:u64`);
    if (native_ === undefined || native_.fields.join() !== expected.join()) {
      throw new Error(
        `the native library's "${name}" op is [${native_?.fields ?? "missing"}], ` +
          `this code encodes [${expected}]: rebuild the library (zig build)`,
      );
    }
    codes[name] = native_.code;
  }
  return codes;
}

const codeCache = new WeakMap<Native, Record<OpName, number>>();

/** A growable list of ops in native memory. */
export class GraphRecorder {
  #native: Native;
  #buffer: NativeBuffer;
  #words: Uint32Array;
  #f64: Float64Array;
  #codes: Record<OpName, number>;
  /** Ops recorded so far. */
  count = 0;

  constructor(native: Native, capacity = 1024) {
    this.#native = native;
    let codes = codeCache.get(native);
    if (codes === undefined) {
      codes = opCodes(native);
      codeCache.set(native, codes);
    }
    this.#codes = codes;
    this.#buffer = native.alloc(capacity * OP_BYTES);
    this.#words = new Uint32Array(this.#buffer.buffer);
    this.#f64 = new Float64Array(this.#buffer.buffer);
  }

  /** The ops' address. */
  get address(): number {
    return this.#buffer.address;
  }

  /** Starts op `name` of type `type`; returns the word index of its first field. */
  #begin(name: OpName, type: number): number {
    if (this.count * OP_WORDS >= this.#words.length) this.#grow();
    const base = this.count * OP_WORDS;
    this.#words.fill(0, base, base + OP_WORDS);
    this.#words[base] = this.#codes[name];
    this.#words[base + 1] = type;
    this.count++;
    return base + 2;
  }

  /** Field number `index` (u64) of the op whose fields start at word `at`. */
  #u(at: number, index: number, value: number): void {
    const w = at + 2 * index;
    this.#words[w] = value % 0x1_0000_0000;
    this.#words[w + 1] = Math.floor(value / 0x1_0000_0000);
  }

  /** Field `index` (f64). */
  #f(at: number, index: number, value: number): void {
    this.#f64[(at + 2 * index) / 2] = value;
  }

  matmul(
    type: number,
    out: number,
    weight: number,
    x: number,
    rows: number,
    cols: number,
    tokens: number,
  ): void {
    const at = this.#begin("matmul", type);
    this.#u(at, F.matmul.out, out);
    this.#u(at, F.matmul.weight, weight);
    this.#u(at, F.matmul.x, x);
    this.#u(at, F.matmul.rows, rows);
    this.#u(at, F.matmul.cols, cols);
    this.#u(at, F.matmul.tokens, tokens);
  }

  rmsnorm(out: number, x: number, weight: number, n: number, tokens: number, eps: number): void {
    const at = this.#begin("rmsnorm", 0);
    this.#u(at, F.rmsnorm.out, out);
    this.#u(at, F.rmsnorm.x, x);
    this.#u(at, F.rmsnorm.weight, weight);
    this.#u(at, F.rmsnorm.n, n);
    this.#u(at, F.rmsnorm.tokens, tokens);
    this.#f(at, F.rmsnorm.eps, eps);
  }

  rope(
    x: number,
    positions: number,
    tokens: number,
    heads: number,
    headDim: number,
    ropeDims: number,
    freqFactors: number,
    neox: boolean,
    freqBase: number,
  ): void {
    const at = this.#begin("rope", 0);
    this.#u(at, F.rope.x, x);
    this.#u(at, F.rope.positions, positions);
    this.#u(at, F.rope.tokens, tokens);
    this.#u(at, F.rope.heads, heads);
    this.#u(at, F.rope.head_dim, headDim);
    this.#u(at, F.rope.rope_dims, ropeDims);
    this.#u(at, F.rope.freq_factors, freqFactors);
    this.#u(at, F.rope.neox, neox ? 1 : 0);
    this.#f(at, F.rope.freq_base, freqBase);
  }

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
    const at = this.#begin("store_kv", cacheType);
    this.#u(at, F.store_kv.cache, cache);
    this.#u(at, F.store_kv.src, src);
    this.#u(at, F.store_kv.positions, positions);
    this.#u(at, F.store_kv.slots, slots);
    this.#u(at, F.store_kv.tokens, tokens);
    this.#u(at, F.store_kv.kv_dim, kvDim);
    this.#u(at, F.store_kv.slot_rows, slotRows);
    this.#u(at, F.store_kv.slot_count, slotCount);
  }

  attention(
    cacheType: number,
    out: number,
    q: number,
    k: number,
    v: number,
    positions: number,
    slots: number,
    tokens: number,
    heads: number,
    kvHeads: number,
    headDim: number,
    slotRows: number,
    slotCount: number,
    window: number,
    scale: number,
    vCacheType: number,
    alone: boolean,
  ): void {
    const at = this.#begin("attention", cacheType);
    this.#u(at, F.attention.out, out);
    this.#u(at, F.attention.q, q);
    this.#u(at, F.attention.k, k);
    this.#u(at, F.attention.v, v);
    this.#u(at, F.attention.positions, positions);
    this.#u(at, F.attention.slots, slots);
    this.#u(at, F.attention.tokens, tokens);
    this.#u(at, F.attention.heads, heads);
    this.#u(at, F.attention.kv_heads, kvHeads);
    this.#u(at, F.attention.head_dim, headDim);
    this.#u(at, F.attention.slot_rows, slotRows);
    this.#u(at, F.attention.slot_count, slotCount);
    this.#u(at, F.attention.window, window);
    this.#f(at, F.attention.scale, scale);
    // V's cache type in the low 32 bits, `alone` in bit 32 (graph.zig's Attention.mode)
    this.#u(at, F.attention.mode, vCacheType + (alone ? 2 ** 32 : 0));
  }

  swiglu(out: number, gate: number, up: number, n: number): void {
    const at = this.#begin("swiglu", 0);
    this.#u(at, F.swiglu.out, out);
    this.#u(at, F.swiglu.gate, gate);
    this.#u(at, F.swiglu.up, up);
    this.#u(at, F.swiglu.n, n);
  }

  geglu(out: number, gate: number, up: number, n: number): void {
    const at = this.#begin("geglu", 0);
    this.#u(at, F.geglu.out, out);
    this.#u(at, F.geglu.gate, gate);
    this.#u(at, F.geglu.up, up);
    this.#u(at, F.geglu.n, n);
  }

  addRows(out: number, x: number, bias: number, rows: number, n: number): void {
    const at = this.#begin("add_rows", 0);
    this.#u(at, F.add_rows.out, out);
    this.#u(at, F.add_rows.x, x);
    this.#u(at, F.add_rows.bias, bias);
    this.#u(at, F.add_rows.rows, rows);
    this.#u(at, F.add_rows.n, n);
  }

  gelu(out: number, x: number, n: number): void {
    const at = this.#begin("gelu", 0);
    this.#u(at, F.gelu.out, out);
    this.#u(at, F.gelu.x, x);
    this.#u(at, F.gelu.n, n);
  }
  norm(
    out: number,
    x: number,
    weight: number,
    bias: number,
    n: number,
    tokens: number,
    eps: number,
  ): void {
    const at = this.#begin("norm", 0);
    this.#u(at, F.norm.out, out);
    this.#u(at, F.norm.x, x);
    this.#u(at, F.norm.weight, weight);
    this.#u(at, F.norm.bias, bias);
    this.#u(at, F.norm.n, n);
    this.#u(at, F.norm.tokens, tokens);
    this.#f(at, F.norm.eps, eps);
  }
  scale(out: number, x: number, n: number, s: number): void {
    const at = this.#begin("scale", 0);
    this.#u(at, F.scale.out, out);
    this.#u(at, F.scale.x, x);
    this.#u(at, F.scale.n, n);
    this.#f(at, F.scale.s, s);
  }

  hadamard(x: number, rows: number, n: number): void {
    const at = this.#begin("hadamard", 0);
    this.#u(at, F.hadamard.x, x);
    this.#u(at, F.hadamard.rows, rows);
    this.#u(at, F.hadamard.n, n);
  }

  add(out: number, a: number, b: number, n: number): void {
    const at = this.#begin("add", 0);
    this.#u(at, F.add.out, out);
    this.#u(at, F.add.a, a);
    this.#u(at, F.add.b, b);
    this.#u(at, F.add.n, n);
  }

  getRows(
    type: number,
    out: number,
    table: number,
    ids: number,
    count: number,
    rowLength: number,
    rowCount: number,
  ): void {
    const at = this.#begin("get_rows", type);
    this.#u(at, F.get_rows.out, out);
    this.#u(at, F.get_rows.table, table);
    this.#u(at, F.get_rows.ids, ids);
    this.#u(at, F.get_rows.count, count);
    this.#u(at, F.get_rows.row_length, rowLength);
    this.#u(at, F.get_rows.row_count, rowCount);
  }

  #grow(): void {
    const capacity = (this.#words.length / OP_WORDS) * 2;
    const opCountMax = this.#native.limits.opCountMax;
    if (capacity > opCountMax) {
      throw new RangeError(`a graph holds at most ${opCountMax} ops`);
    }
    const grown = this.#native.alloc(capacity * OP_BYTES);
    grown.bytes().set(new Uint8Array(this.#buffer.buffer));
    this.#buffer.free();
    this.#buffer = grown;
    this.#words = new Uint32Array(grown.buffer);
    this.#f64 = new Float64Array(grown.buffer);
  }

  /** Frees the op buffer. */
  free(): void {
    this.#buffer.free();
  }
}

/**
 * Records kernel calls as `Op`s (see `ffi/graph.zig`) into a native buffer, to
 * run them all with one `dotllm_graph_run`.
 *
 * @module
 */
import type { Native, NativeBuffer } from "../native/mod.ts";

/** Op codes, as `OpCode` in `ffi/graph.zig`. */
export const OpCode = {
  matmul: 1,
  rmsnorm: 2,
  rope: 3,
  storeKv: 4,
  attention: 5,
  swiglu: 6,
  add: 7,
  getRows: 8,
} as const;

/** Bytes of one op: code, type, 15 u64 arguments. */
const OP_BYTES = 128;
const OP_WORDS = OP_BYTES / 4;
/** Most ops one graph may hold (as `op_count_max` in `ffi/graph.zig`). */
export const GRAPH_OPS_MAX = 1 << 16;

/** A growable list of ops in native memory. */
export class GraphRecorder {
  #native: Native;
  #buffer: NativeBuffer;
  #words: Uint32Array;
  #floats: Float32Array;
  /** Ops recorded so far. */
  count = 0;

  constructor(native: Native, capacity = 1024) {
    this.#native = native;
    this.#buffer = native.alloc(capacity * OP_BYTES);
    this.#words = new Uint32Array(this.#buffer.buffer);
    this.#floats = new Float32Array(this.#buffer.buffer);
  }

  /** The ops' address. */
  get address(): number {
    return this.#buffer.address;
  }

  /**
   * Appends one op with up to 10 integer arguments (addresses and counts).
   * Positional parameters, not an array: recording a forward pass allocates nothing.
   */
  push(
    code: number,
    type: number,
    a0 = 0,
    a1 = 0,
    a2 = 0,
    a3 = 0,
    a4 = 0,
    a5 = 0,
    a6 = 0,
    a7 = 0,
    a8 = 0,
    a9 = 0,
  ): void {
    if (this.count * OP_WORDS >= this.#words.length) this.#grow();
    const base = this.count * OP_WORDS;
    this.#words.fill(0, base, base + OP_WORDS);
    this.#words[base] = code;
    this.#words[base + 1] = type;
    this.#set(base, 0, a0);
    this.#set(base, 1, a1);
    this.#set(base, 2, a2);
    this.#set(base, 3, a3);
    this.#set(base, 4, a4);
    this.#set(base, 5, a5);
    this.#set(base, 6, a6);
    this.#set(base, 7, a7);
    this.#set(base, 8, a8);
    this.#set(base, 9, a9);
    this.count++;
  }

  /** Stores argument `index` of the last op as the bits of the f32 `value`. */
  setF32(index: number, value: number): void {
    const at = (this.count - 1) * OP_WORDS + 2 + 2 * index;
    this.#floats[at] = value;
    this.#words[at + 1] = 0;
  }

  #set(base: number, index: number, value: number): void {
    const at = base + 2 + 2 * index;
    this.#words[at] = value % 0x1_0000_0000;
    this.#words[at + 1] = Math.floor(value / 0x1_0000_0000);
  }

  #grow(): void {
    const capacity = (this.#words.length / OP_WORDS) * 2;
    if (capacity > GRAPH_OPS_MAX) {
      throw new RangeError(`a graph holds at most ${GRAPH_OPS_MAX} ops`);
    }
    const grown = this.#native.alloc(capacity * OP_BYTES);
    grown.bytes().set(new Uint8Array(this.#buffer.buffer));
    this.#buffer.free();
    this.#buffer = grown;
    this.#words = new Uint32Array(grown.buffer);
    this.#floats = new Float32Array(grown.buffer);
  }

  /** Frees the op buffer. */
  free(): void {
    this.#buffer.free();
  }
}

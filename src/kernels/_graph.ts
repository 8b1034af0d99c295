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
const ARGS_MAX = 15;
/** Most ops one graph may hold (as `op_count_max` in `ffi/graph.zig`). */
export const GRAPH_OPS_MAX = 1 << 16;

/** A marker for an argument passed as f32 bits. */
export class F32Arg {
  constructor(readonly value: number) {}
}

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

  /** Appends one op; `args` are addresses and counts (numbers) or f32 values (`F32Arg`). */
  push(code: number, type: number, args: ReadonlyArray<number | F32Arg>): void {
    if (args.length > ARGS_MAX) throw new RangeError(`an op takes at most ${ARGS_MAX} arguments`);
    if (this.count * OP_WORDS >= this.#words.length) this.#grow();
    const w = this.#words;
    const base = this.count * OP_WORDS;
    w.fill(0, base, base + OP_WORDS);
    w[base] = code;
    w[base + 1] = type;
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      const at = base + 2 + 2 * i;
      if (arg instanceof F32Arg) {
        this.#floats[at] = arg.value;
      } else {
        w[at] = arg % 0x1_0000_0000;
        w[at + 1] = Math.floor(arg / 0x1_0000_0000);
      }
    }
    this.count++;
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

/**
 * Load-time repacking (llama.cpp's CPU_REPACK): matmul weights whose type has
 * an interleaved layout in the native type table (`ffi/repack.zig`: Q4_0,
 * IQ4_NL and Q4_K on AVX-512 VNNI) are copied into it once, so the decode step reads each
 * 16-row block column as the kernel consumes it instead of transposing it
 * every token. The layout sums in the same order: logits keep their bits.
 *
 * The copies live in native buffers the {@linkcode Repacked} owns (as many
 * bytes as the tensors they replace); the file's pages of those tensors are
 * then released (`dotllm_release_pages`), so the resident set stays about
 * the model's size. Token embeddings are never repacked (rows are looked up
 * by id), nor a tied LM head (it is the embedding).
 *
 * @module
 */
import type { Native, NativeBuffer } from "../native/native.ts";
import type { LayerWeights, ModelWeights, Weight } from "./weights.ts";
import { tagged } from "./_tagged.ts";

/** Weights with their repacked matmul matrices, and the buffers that hold them. */
export interface Repacked {
  readonly weights: ModelWeights;
  /** The native buffers of the repacked matrices (free them with the model). */
  readonly buffers: readonly NativeBuffer[];
  /** Bytes copied into interleaved layouts. */
  readonly sizeBytes: number;
}

const MATMUL_WEIGHTS = ["wq", "wk", "wv", "wqkv", "wo", "wGate", "wUp", "wDown"] as const;

/** Repacks every matmul weight of `weights` that has a layout on this machine. */
export function repackWeights(native: Native, weights: ModelWeights): Repacked {
  const buffers: NativeBuffer[] = [];
  let sizeBytes = 0;
  const repack = (w: Weight): Weight => {
    const id = native.fn.dotllm_repack_type(w.type, w.rowCount, w.rowLength);
    if (id < 0) return w;
    const buffer = native.alloc(w.sizeBytes);
    const got = native.fn.dotllm_repack(w.type, w.rowCount, w.rowLength, w.address, buffer.address);
    if (got !== id) {
      buffer.free();
      throw new Error(`repacking tensor "${w.name}" failed (layout ${id}, got ${got})`);
    }
    buffers.push(buffer);
    sizeBytes += w.sizeBytes;
    // The file's pages of the tensor are not read again: out of the resident set.
    native.fn.dotllm_release_pages(w.address, w.sizeBytes);
    return tagged({ ...w, type: id, address: buffer.address });
  };
  try {
    const layers = weights.layers.map((layer) => {
      const out: Record<string, Weight | undefined> = { ...layer };
      for (const key of MATMUL_WEIGHTS) {
        const w = layer[key];
        if (w !== undefined) out[key] = repack(w);
      }
      return out as unknown as LayerWeights;
    });
    const output = weights.tiedOutput ? weights.output : repack(weights.output);
    return { weights: { ...weights, layers, output }, buffers, sizeBytes };
  } catch (error) {
    for (const b of buffers) b.free();
    throw error;
  }
}

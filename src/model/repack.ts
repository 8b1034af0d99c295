/**
 * Load-time repacking (llama.cpp's CPU_REPACK): matmul weights whose type has
 * an interleaved layout in the native type table (`ffi/repack.zig`: Q4_0,
 * IQ4_NL and Q4_K in 16-row groups, Q4_1 in 4-row groups, on AVX-512 VNNI)
 * are copied into it once, so the decode step reads each block column as the
 * kernel consumes it instead of transposing it every token. The layout sums
 * in the same order: logits keep their bits.
 *
 * The other matmul weights, and a tied LM head (it is the token embedding),
 * are copied as they are: the native buffers start on 2 MiB boundaries and
 * are offered to the kernel as transparent huge pages (`dotllm_alloc`), so a
 * decode step streams them without a TLB miss and a prefetcher restart every
 * 4 KiB page of the file mapping (1B-shape decode at 1 thread, medians of
 * alternating rounds on the Intel Xeon of 2026-12-04: Q8_0 8.9 → 10.2 tok/s,
 * Q4_K_M 12.6 → 14.1).
 *
 * The copies live in native buffers the {@linkcode Repacked} owns (as many
 * bytes as the tensors they replace); when the weights are a file mapping,
 * the file's pages of those tensors are then released
 * (`dotllm_release_pages`), so the resident set stays about the model's
 * size. Token embeddings are never repacked (rows are looked up by id), nor a
 * tied LM head (it is the embedding): a tied one is copied as it is and
 * serves both.
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
  /** Bytes copied as they are (into huge-page memory). */
  readonly copiedBytes: number;
}

const MATMUL_WEIGHTS = ["wq", "wk", "wv", "wqkv", "wo", "wGate", "wUp", "wDown"] as const;

/**
 * Repacks every matmul weight of `weights` that has a layout on this machine,
 * and copies the other matmul weights and a tied LM head as they are.
 */
export function repackWeights(
  native: Native,
  weights: ModelWeights,
  options: { releasePages: boolean },
): Repacked {
  const buffers: NativeBuffer[] = [];
  let sizeBytes = 0;
  let copiedBytes = 0;
  /** `w` in a native buffer of ours, interleaved (`id` ≥ 0) or as it is (-1). */
  const place = (w: Weight, id: number): Weight => {
    const buffer = native.alloc(w.sizeBytes);
    if (id >= 0) {
      const got = native.fn.dotllm_repack(
        w.type,
        w.rowCount,
        w.rowLength,
        w.address,
        buffer.address,
      );
      if (got !== id) {
        buffer.free();
        throw new Error(`repacking tensor "${w.name}" failed (layout ${id}, got ${got})`);
      }
      sizeBytes += w.sizeBytes;
    } else {
      buffer.bytes().set(new Uint8Array(native.view(w.address, w.sizeBytes)));
      copiedBytes += w.sizeBytes;
    }
    buffers.push(buffer);
    // The file's pages of the tensor are not read again: out of the resident set. (Only
    // a file mapping's: in memory the caller owns, such as a model built in a buffer,
    // released pages would read back as zeros.)
    if (options.releasePages) native.fn.dotllm_release_pages(w.address, w.sizeBytes);
    return tagged({ ...w, type: id >= 0 ? id : w.type, address: buffer.address });
  };
  const repack = (w: Weight): Weight =>
    place(w, native.fn.dotllm_repack_type(w.type, w.rowCount, w.rowLength));
  try {
    const layers = weights.layers.map((layer) => {
      const out: Record<string, Weight | undefined> = { ...layer };
      for (const key of MATMUL_WEIGHTS) {
        const w = layer[key];
        if (w !== undefined) out[key] = repack(w);
      }
      return out as unknown as LayerWeights;
    });
    if (weights.tiedOutput) {
      // Looked up by row as well: copied, never interleaved.
      const shared = place(weights.tokenEmbedding, -1);
      return {
        weights: { ...weights, layers, tokenEmbedding: shared, output: shared },
        buffers,
        sizeBytes,
        copiedBytes,
      };
    }
    const output = repack(weights.output);
    return { weights: { ...weights, layers, output }, buffers, sizeBytes, copiedBytes };
  } catch (error) {
    for (const b of buffers) b.free();
    throw error;
  }
}

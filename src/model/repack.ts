/**
 * Load-time repacking (llama.cpp's CPU_REPACK): matmul weights whose type has
 * an interleaved layout in the native type table (`ffi/repack.zig`: Q4_0,
 * IQ4_NL and Q4_K in 16-row groups, Q4_1 in 4-row groups, on AVX-512 VNNI;
 * 8-row groups and the float types' 4-row groups on AVX2; Q6_K's blocks
 * recoded in byte planes on AVX2, rows unchanged) are copied into it once, so
 * the decode step reads each block column as the kernel consumes it instead of
 * transposing it every token. The layout sums in the same order: logits keep
 * their bits.
 *
 * The other matmul weights are copied as they are, and so is a tied LM head (it
 * is the token embedding) unless its layout can still look rows up (the float
 * layouts and Q6_K's planes: `rowLookup`). Every copy goes into one native
 * buffer, the arena, in the order a decode step reads them (layer by layer,
 * then the LM head), each tensor on a page boundary. The arena starts on a 2
 * MiB boundary and is offered to the kernel as transparent huge pages
 * (`dotllm_alloc`), so a decode step streams it without a TLB miss and a
 * prefetcher restart every 4 KiB page (1B-shape decode at 1 thread, medians of
 * alternating rounds on the Intel Xeon of 2026-12-04, huge pages against the
 * file mapping: Q8_0 8.9 → 10.2 tok/s, Q4_K_M 12.6 → 14.1). One buffer per
 * tensor took huge pages only for tensors of 2 MiB or more, so a small model's
 * matrices (smollm-135m: 0.2-1.8 MB each) stayed in 4 KiB pages: on the Zen 4
 * host, 450 MB rings of F16 matrices of 192-1536 × 576, GEMV at 1 thread, 18-24
 * GB/s in separate buffers against 22-31 GB/s in one huge-page buffer (a plain
 * read of the same bytes: 18-25 against 25-32 GB/s).
 *
 * The arena is the {@linkcode Repacked}'s one buffer (as many bytes as the
 * tensors it replaces, plus page padding); when the weights are a file mapping,
 * the file's pages of those tensors are then released
 * (`dotllm_release_pages`), so the resident set stays about the model's
 * size. An untied token embedding stays where it is (rows are looked up by
 * id, once per token); a tied LM head, repacked or copied, serves as both.
 *
 * @module
 */
import type { Native, NativeBuffer } from "../native/native.ts";
import type { LayerWeights, ModelWeights, Weight } from "./weights.ts";
import { tagged } from "./_tagged.ts";
import { computableType } from "../kernels/mod.ts";

/** Weights with their repacked matmul matrices, and the buffers that hold them. */
export interface Repacked {
  readonly weights: ModelWeights;
  /** The native buffer (the arena) of the placed matrices (free it with the model). */
  readonly buffers: readonly NativeBuffer[];
  /** Bytes copied into interleaved layouts. */
  readonly sizeBytes: number;
  /** Bytes copied as they are (into huge-page memory). */
  readonly copiedBytes: number;
}

const MATMUL_WEIGHTS = ["wq", "wk", "wv", "wqkv", "wo", "wGate", "wUp", "wDown"] as const;

/**
 * Start of each tensor in the arena, bytes: a page, so a tensor's first row starts
 * where a stream of the hardware prefetcher can.
 */
const ARENA_ALIGNMENT = 4096;

/**
 * Repacks every matmul weight of `weights` that has a layout on this machine,
 * and copies the other matmul weights and a tied LM head as they are.
 */
export function repackWeights(
  native: Native,
  weights: ModelWeights,
  options: { releasePages: boolean },
): Repacked {
  // Where each matmul weight goes: its interleaved layout's id, or -1 (as it is).
  const plan: Array<{ w: Weight; id: number; offset: number }> = [];
  let arenaBytes = 0;
  const reserve = (w: Weight, id: number) => {
    plan.push({ w, id, offset: arenaBytes });
    arenaBytes += Math.ceil(w.sizeBytes / ARENA_ALIGNMENT) * ARENA_ALIGNMENT;
  };
  const layout = (w: Weight) => native.fn.dotllm_repack_type(w.type, w.rowCount, w.rowLength);
  for (const layer of weights.layers) {
    for (const key of MATMUL_WEIGHTS) {
      const w = layer[key];
      if (w !== undefined) reserve(w, layout(w));
    }
  }
  // A tied LM head is looked up by row as well: interleaved only into a layout whose
  // rows can still be looked up (the float layouts, Q6_K's planes), else copied as it is.
  const head = weights.tiedOutput ? weights.tokenEmbedding : weights.output;
  const headLayout = layout(head);
  reserve(
    head,
    !weights.tiedOutput || headLayout < 0 || computableType(native, headLayout)?.rowLookup
      ? headLayout
      : -1,
  );
  const arena = native.alloc(arenaBytes);
  let sizeBytes = 0;
  let copiedBytes = 0;
  const placed = new Map<Weight, Weight>();
  try {
    for (const { w, id, offset } of plan) {
      const address = arena.address + offset;
      if (id >= 0) {
        const got = native.fn.dotllm_repack(w.type, w.rowCount, w.rowLength, w.address, address);
        if (got !== id) {
          throw new Error(`repacking tensor "${w.name}" failed (layout ${id}, got ${got})`);
        }
        sizeBytes += w.sizeBytes;
      } else {
        new Uint8Array(native.view(address, w.sizeBytes)).set(
          new Uint8Array(native.view(w.address, w.sizeBytes)),
        );
        copiedBytes += w.sizeBytes;
      }
      // The file's pages of the tensor are not read again: out of the resident set. (Only
      // a file mapping's: in memory the caller owns, such as a model built in a buffer,
      // released pages would read back as zeros.)
      if (options.releasePages) native.fn.dotllm_release_pages(w.address, w.sizeBytes);
      placed.set(w, tagged({ ...w, type: id >= 0 ? id : w.type, address }));
    }
  } catch (error) {
    arena.free();
    throw error;
  }
  const at = (w: Weight): Weight => placed.get(w)!;
  const layers = weights.layers.map((layer) => {
    const out: Record<string, Weight | undefined> = { ...layer };
    for (const key of MATMUL_WEIGHTS) {
      const w = layer[key];
      if (w !== undefined) out[key] = at(w);
    }
    return out as unknown as LayerWeights;
  });
  const result = weights.tiedOutput
    ? {
      ...weights,
      layers,
      tokenEmbedding: at(weights.tokenEmbedding),
      output: at(weights.tokenEmbedding),
    }
    : { ...weights, layers, output: at(weights.output) };
  return { weights: result, buffers: [arena], sizeBytes, copiedBytes };
}

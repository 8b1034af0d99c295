/**
 * The forward pass, written once: every architecture of the table runs this
 * function; what differs between them are optional steps (present when the
 * entry and the weights say so), never another copy of the graph.
 *
 * It records one batch of kernel calls (one native graph where the kernels
 * batch them) and allocates nothing.
 *
 * @module
 */
import type { Architecture } from "./arch.ts";
import type { ModelConfig } from "./config.ts";
import type { ForwardOps } from "./ops.ts";
import type { ModelWeights } from "./weights.ts";

/** F32, as a ggml type id (the activations' type, for `getRows` over them). */
const F32 = 0;

/** What the forward pass reads of the model (immutable). */
export interface ForwardModel {
  readonly config: ModelConfig;
  readonly architecture: Architecture;
  readonly weights: ModelWeights;
  /** Each layer's attention window (0 = whole context). */
  readonly layerWindows: Int32Array;
  /** Each layer's RoPE frequency base. */
  readonly layerRopeBases: Float64Array;
}

/** The KV cache layout: per layer `[slots][rows(l)][kvDim]` of K's and of V's type. */
export interface ForwardCache {
  /** K's cache type (its ggml id: 0 = F32, 1 = F16, 8 = Q8_0, ...). */
  readonly kTypeId: number;
  /** V's cache type (as `kTypeId`). */
  readonly vTypeId: number;
  /** Width of the Hadamard rotation of Q and K around a quantized K (0: none). */
  readonly kRotation: number;
  /** Width of the Hadamard rotation of V and of the attention output around a quantized V (0: none). */
  readonly vRotation: number;
  /** Positions per slot (the context). */
  readonly slotRows: number;
  readonly slotCount: number;
  /** Rows per slot of layer `l`: `slotRows`, or a ring for a sliding-window layer. */
  rows(layer: number): number;
  /** Address of each layer's K cache. */
  readonly kLayers: readonly number[];
  /** Address of each layer's V cache. */
  readonly vLayers: readonly number[];
}

/**
 * The native buffers of one context (addresses), sized for its largest batch
 * `B` and its most logits rows `R`.
 */
export interface ForwardBuffers {
  readonly x: number; // [B][E] residual stream
  readonly xb: number; // [B][E] normed input / block output
  readonly q: number; // [B][H·D]
  readonly k: number; // [B][Hkv·D]
  readonly v: number; // [B][Hkv·D]
  readonly att: number; // [B][H·D]
  readonly gate: number; // [B][F]
  readonly up: number; // [B][F]
  /** [B][(H + 2·Hkv)·D] fused QKV output, or 0 when the architecture has none. */
  readonly qkv: number;
  /** i32 rows of `qkv` viewed as [B·(H+2Hkv)][D]: Q heads [B·H], K [B·Hkv], V [B·Hkv]. */
  readonly qkvIds: readonly [number, number, number];
  /** [B][2F] fused gate+up output, or 0. */
  readonly gateUp: number;
  /** i32 rows of `gateUp` viewed as [2B][F]: gate [B], up [B]. */
  readonly gateUpIds: readonly [number, number];
  readonly tokens: number; // [B] i32 token ids
  readonly positions: number; // [B] i32
  readonly slots: number; // [B] i32
  /**
   * [B] i32: for a bidirectional model, each token's last position of its sequence in the
   * batch (attention's upper bound in place of its own position); 0 for a causal one.
   */
  readonly attendTo: number;
  readonly outRows: number; // [R] i32 batch rows that want logits
  readonly xOut: number; // [R][E]
  readonly logits: number; // [R][V]
}

/**
 * Kernel ops a model needs that the kernel interface lacks, as a sentence,
 * or undefined when it can run. An architecture that needs a new op names
 * it here until the op exists.
 */
export function missingOps(model: ForwardModel, kernels: ForwardOps): string | undefined {
  const a = model.architecture;
  const missing: string[] = [];
  if (model.weights.layers.some((l) => l.bq || l.bk || l.bv) && !kernels.addRows) {
    missing.push("a bias add (addRows)");
  }
  if (a.activation === "gelu_tanh" && !kernels.geglu) missing.push("GELU-tanh gated FFN (geglu)");
  if (a.activation === "gelu" && !kernels.gelu) missing.push("GELU (gelu)");
  if (a.norms === "post" && (!kernels.layerNorm || !kernels.addRows)) {
    missing.push("layer norm with bias (layerNorm) and bias adds (addRows)");
  }
  if ((a.embeddingScale(model.config) !== 1 || a.scalesQuery) && !kernels.scale) {
    missing.push("a scale op (embedding or query scale)");
  }
  return missing.length > 0 ? missing.join(", ") : undefined;
}

/**
 * Records the forward pass of `T` tokens (ids, positions and slots already
 * in `b`) and, when `R > 0`, the logits of the `R` rows listed in
 * `b.outRows` (the first of them `firstOutRow`) into `b.logits` [R][V]. The
 * caller wraps it in `beginGraph`/`endGraph`.
 *
 * With `hidden` (embeddings; then `R` must be 0), every token's final hidden
 * state is left in `b.x` [T][E]: after the output norm where the model has
 * one (llama.cpp's `t_embd`), as it is for an encoder (BERT).
 *
 * With `alone`, attention computes every token in the order of a token
 * decoded alone (see `ForwardOps.attention`): speculative verification.
 */
export function forward(
  k: ForwardOps,
  m: ForwardModel,
  cache: ForwardCache,
  b: ForwardBuffers,
  T: number,
  R: number,
  firstOutRow: number,
  hidden = false,
  alone = false,
): void {
  const c = m.config;
  const w = m.weights;
  const arch = m.architecture;
  const E = c.embeddingLength;
  const H = c.headCount;
  const Hkv = c.headCountKv;
  const D = c.headDim;
  const Q = H * D;
  const KV = Hkv * D;
  const F = c.feedForwardLength;
  const eps = c.rmsEpsilon;
  const kt = cache.kTypeId, vt = cache.vTypeId;
  const kRot = cache.kRotation, vRot = cache.vRotation;
  const contextRows = cache.slotRows, slotCount = cache.slotCount;
  const neox = arch.rope === "neox";
  // LongRoPE (Phi-3): the long factors when a sequence may run past the original context
  // (llama.cpp: n_ctx_seq > n_ctx_orig_yarn), else the short ones; Llama 3's rope_freqs otherwise.
  const factors = w.ropeFactorsLong && contextRows > c.ropeOriginalContextLength
    ? w.ropeFactorsLong
    : w.ropeFactorsShort ?? w.ropeFreqs;
  const freqs = factors?.address ?? 0;
  // rope.scaling.attn_factor multiplies RoPE's cos and sin of Q and of K: Q·K by its square.
  // Gemma scales Q (after RoPE, before it is rounded to the cache type), the others the scores.
  const qScale = arch.scalesQuery ? arch.attentionScale(c) : 1;
  const scale = (arch.scalesQuery ? 1 : arch.attentionScale(c)) * c.ropeAttnFactor *
    c.ropeAttnFactor;
  const embScale = arch.embeddingScale(c);
  const { x, xb, q, att, gate, up, positions: pos, slots } = b;
  const kk = b.k, v = b.v;
  const post = arch.norms === "post";
  const rope = arch.rope !== "none";
  // A bidirectional token attends its sequence's positions up to the batch's last one.
  const attendTo = c.causal ? pos : b.attendTo;

  // x [T][E] = token_embd[ids]
  const emb = w.tokenEmbedding;
  k.getRows(emb.type, x, emb.address, b.tokens, T, E, emb.rowCount);
  if (embScale !== 1) k.scale!(x, x, embScale, T * E); // Gemma: x ×= √E
  // BERT: + token type 0 ("sentence A"), + position_embd[pos], then a layer norm.
  if (w.tokenTypes !== undefined) k.addRows!(x, x, w.tokenTypes.address, T, E);
  const pe = w.positionEmbedding;
  if (pe !== undefined) {
    k.getRows(pe.type, xb, pe.address, pos, T, E, pe.rowCount); // xb [T][E]
    k.add(x, x, xb, T * E);
  }
  const en = w.tokenEmbeddingNorm, enb = w.tokenEmbeddingNormBias;
  if (en !== undefined && enb !== undefined) k.layerNorm!(x, x, en.address, enb.address, E, T, eps);

  for (let l = 0; l < c.blockCount; l++) {
    const L = w.layers[l];
    const kCache = cache.kLayers[l]; // [slots][rows][KV]
    const vCache = cache.vLayers[l]; // [slots][rows][KV]
    const rows = cache.rows(l); // the context, or a ring for a sliding-window layer

    // Attention block (post-norm: the block's input itself, normed after the residual add).
    if (L.attnNorm !== undefined) k.rmsnorm(xb, x, L.attnNorm.address, E, T, eps); // xb [T][E]
    const xa = post ? x : xb;
    if (L.wqkv !== undefined) {
      const heads = H + 2 * Hkv, ids = b.qkvIds; // (indexing: no iterator allocated)
      k.matmul(L.wqkv.type, b.qkv, L.wqkv.address, xa, Q + 2 * KV, E, T); // qkv [T][Q+2KV]
      k.getRows(F32, q, b.qkv, ids[0], T * H, D, T * heads); // q [T][H·D]
      k.getRows(F32, kk, b.qkv, ids[1], T * Hkv, D, T * heads); // k [T][Hkv·D]
      k.getRows(F32, v, b.qkv, ids[2], T * Hkv, D, T * heads); // v [T][Hkv·D]
    } else {
      k.matmul(L.wq!.type, q, L.wq!.address, xa, Q, E, T); // q [T][H·D]
      k.matmul(L.wk!.type, kk, L.wk!.address, xa, KV, E, T); // k [T][Hkv·D]
      k.matmul(L.wv!.type, v, L.wv!.address, xa, KV, E, T); // v [T][Hkv·D]
    }
    if (L.bq !== undefined) k.addRows!(q, q, L.bq.address, T, Q); // q += bq
    if (L.bk !== undefined) k.addRows!(kk, kk, L.bk.address, T, KV); // k += bk
    if (L.bv !== undefined) k.addRows!(v, v, L.bv.address, T, KV); // v += bv
    if (L.qNorm !== undefined) k.rmsnorm(q, q, L.qNorm.address, D, T * H, eps); // q per head
    if (L.kNorm !== undefined) k.rmsnorm(kk, kk, L.kNorm.address, D, T * Hkv, eps); // k per head
    const base = m.layerRopeBases[l];
    if (rope) k.rope(q, T, H, D, c.ropeDimensionCount, pos, base, freqs, neox); // q [T][H][D]
    if (rope) k.rope(kk, T, Hkv, D, c.ropeDimensionCount, pos, base, freqs, neox); // k [T][Hkv][D]
    if (qScale !== 1) k.scale!(q, q, qScale, T * Q); // Gemma: q ×= 1/√key_length
    // A quantized cache: Q and K (quantized K), V (quantized V) rotated, as llama.cpp.
    if (kRot > 0) k.hadamard!(q, (T * Q) / kRot, kRot);
    if (kRot > 0) k.hadamard!(kk, (T * KV) / kRot, kRot);
    if (vRot > 0) k.hadamard!(v, (T * KV) / vRot, vRot);
    k.storeKv(kt, kCache, kk, pos, slots, T, KV, rows, slotCount); // kCache[slot][pos]
    k.storeKv(vt, vCache, v, pos, slots, T, KV, rows, slotCount); // vCache[slot][pos]
    // A window wider than a context-sized cache never masks: the whole context (the kernel
    // takes no window past its rows).
    const window = Math.min(m.layerWindows[l], rows);
    k.attention(
      kt,
      att,
      q,
      kCache,
      vCache,
      T,
      attendTo,
      slots,
      H,
      Hkv,
      D,
      scale,
      rows,
      window,
      slotCount,
      vt,
      alone,
    ); // att [T][H·D]
    if (vRot > 0) k.hadamard!(att, (T * Q) / vRot, vRot); // rotated back
    k.matmul(L.wo.type, xb, L.wo.address, att, E, Q, T); // xb [T][E]
    if (L.bo !== undefined) k.addRows!(xb, xb, L.bo.address, T, E); // xb += bo
    if (L.postAttnNorm !== undefined) k.rmsnorm(xb, xb, L.postAttnNorm.address, E, T, eps); // xb [T][E]
    k.add(x, x, xb, T * E); // x += attention
    if (L.attnOutNorm !== undefined) {
      k.layerNorm!(x, x, L.attnOutNorm.address, L.attnOutNormBias!.address, E, T, eps); // BERT
    }

    // Feed-forward block (gated: SwiGLU, or GELU-tanh for Gemma; plain GELU for BERT).
    if (L.ffnNorm !== undefined) k.rmsnorm(xb, x, L.ffnNorm.address, E, T, eps); // xb [T][E]
    const xf = post ? x : xb;
    if (arch.activation === "gelu") {
      k.matmul(L.wUp.type, up, L.wUp.address, xf, F, E, T); // up [T][F]
      if (L.bUp !== undefined) k.addRows!(up, up, L.bUp.address, T, F); // up += b
      k.gelu!(gate, up, T * F); // gate = gelu(up)
    } else if (L.wGate === undefined) {
      const ids = b.gateUpIds;
      k.matmul(L.wUp.type, b.gateUp, L.wUp.address, xb, 2 * F, E, T); // gateUp [T][2F]
      k.getRows(F32, gate, b.gateUp, ids[0], T, F, 2 * T); // gate [T][F]
      k.getRows(F32, up, b.gateUp, ids[1], T, F, 2 * T); // up [T][F]
    } else {
      k.matmul(L.wGate.type, gate, L.wGate.address, xb, F, E, T); // gate [T][F]
      k.matmul(L.wUp.type, up, L.wUp.address, xb, F, E, T); // up [T][F]
    }
    if (arch.activation === "gelu_tanh") k.geglu!(gate, gate, up, T * F); // gate = gelu(gate)·up
    else if (arch.activation === "silu") k.swiglu(gate, gate, up, T * F); // gate = silu(gate)·up
    k.matmul(L.wDown.type, xb, L.wDown.address, gate, E, F, T); // xb [T][E]
    if (L.bDown !== undefined) k.addRows!(xb, xb, L.bDown.address, T, E); // xb += b
    if (L.postFfnNorm !== undefined) k.rmsnorm(xb, xb, L.postFfnNorm.address, E, T, eps); // xb [T][E]
    k.add(x, x, xb, T * E); // x += ffn
    if (L.layerOutNorm !== undefined) {
      k.layerNorm!(x, x, L.layerOutNorm.address, L.layerOutNormBias!.address, E, T, eps); // BERT
    }
  }
  if (hidden) {
    // Embeddings: every row's final hidden state (the output norm's, where there is one).
    if (w.outputNorm !== undefined) k.rmsnorm(x, x, w.outputNorm.address, E, T, eps);
    return;
  }
  if (R === 0) return;
  if (w.outputNorm === undefined) throw new RangeError("this model has no LM head: no logits");

  // Final norm and LM head, only the rows that want logits (one row: normed in place of a gather).
  if (R === 1) {
    k.rmsnorm(b.xOut, x + firstOutRow * E * 4, w.outputNorm.address, E, 1, eps); // xOut [1][E]
  } else {
    k.getRows(F32, b.xOut, x, b.outRows, R, E, T); // xOut [R][E] = x[outRows]
    k.rmsnorm(b.xOut, b.xOut, w.outputNorm.address, E, R, eps); // xOut [R][E]
  }
  const out = w.output;
  k.matmul(out.type, b.logits, out.address, b.xOut, out.rowCount, E, R); // logits [R][V]
}

/**
 * The architecture table (as llama.cpp's `llama-arch.cpp`): for each value of
 * `general.architecture` this package runs, its GGUF key prefix, tensor
 * names, which optional tensors it has, its RoPE style, FFN activation,
 * attention and embedding scales, and the attention window of each layer.
 *
 * The forward pass (`forward.ts`) is one function built from optional steps;
 * an architecture is an entry here (plus any kernel op it needs that does
 * not exist yet), never a new branch of the forward pass.
 *
 * @example Look an architecture up
 * ```ts
 * import { architectureOf } from "./arch.ts";
 * const arch = architectureOf("mistral"); // throws ModelError for one not in the table
 * console.log(arch.rope, arch.activation); // "normal" "silu"
 * ```
 *
 * @module
 */
import { ModelError } from "./errors.ts";

/**
 * How RoPE pairs dimensions: `normal` (x[2i], x[2i+1]), llama; `neox` (x[i], x[i + d/2]);
 * `none`: no rotation (BERT adds learned absolute position embeddings instead).
 */
export type RopeStyle = "normal" | "neox" | "none";

/**
 * The FFN's activation: `silu` (SwiGLU) or `gelu_tanh` (GeGLU, Gemma), both gated;
 * `gelu`: the plain two-matrix FFN `down(gelu(up·x + b) ) + b` (BERT), ggml's tanh GELU.
 */
export type FfnActivation = "silu" | "gelu_tanh" | "gelu";

/**
 * Where the block's norms sit: `pre` (RMSNorm of the input of attention and of the FFN,
 * llama); `post` (layer norm with bias of the residual sum after each, BERT).
 */
export type NormPlacement = "pre" | "post";

/** Whether an optional tensor family exists: never, maybe (when in the file) or always. */
export type Presence = "none" | "optional" | "required";

/** Tensor kinds, each a GGUF name (`%d` = the layer index), as llama.cpp's LLM_TENSOR_*. */
export const TENSOR_NAMES = {
  tokenEmbedding: "token_embd.weight",
  outputNorm: "output_norm.weight",
  output: "output.weight",
  ropeFreqs: "rope_freqs.weight",
  ropeFactorsLong: "rope_factors_long.weight",
  ropeFactorsShort: "rope_factors_short.weight",
  attnNorm: "blk.%d.attn_norm.weight",
  wq: "blk.%d.attn_q.weight",
  wk: "blk.%d.attn_k.weight",
  wv: "blk.%d.attn_v.weight",
  wqkv: "blk.%d.attn_qkv.weight",
  bq: "blk.%d.attn_q.bias",
  bk: "blk.%d.attn_k.bias",
  bv: "blk.%d.attn_v.bias",
  qNorm: "blk.%d.attn_q_norm.weight",
  kNorm: "blk.%d.attn_k_norm.weight",
  wo: "blk.%d.attn_output.weight",
  postAttnNorm: "blk.%d.post_attention_norm.weight",
  ffnNorm: "blk.%d.ffn_norm.weight",
  wGate: "blk.%d.ffn_gate.weight",
  wUp: "blk.%d.ffn_up.weight",
  wDown: "blk.%d.ffn_down.weight",
  postFfnNorm: "blk.%d.post_ffw_norm.weight",
  // BERT (llama.cpp's LLM_ARCH_BERT names).
  positionEmbedding: "position_embd.weight",
  tokenTypes: "token_types.weight",
  tokenEmbeddingNorm: "token_embd_norm.weight",
  tokenEmbeddingNormBias: "token_embd_norm.bias",
  bo: "blk.%d.attn_output.bias",
  attnOutNorm: "blk.%d.attn_output_norm.weight",
  attnOutNormBias: "blk.%d.attn_output_norm.bias",
  bUp: "blk.%d.ffn_up.bias",
  bDown: "blk.%d.ffn_down.bias",
  layerOutNorm: "blk.%d.layer_output_norm.weight",
  layerOutNormBias: "blk.%d.layer_output_norm.bias",
} as const;

/** A tensor kind of {@linkcode TENSOR_NAMES}. */
export type TensorKind = keyof typeof TENSOR_NAMES;

/** The GGUF name of tensor `kind` in layer `layer`. */
export function tensorName(kind: TensorKind, layer = 0): string {
  return TENSOR_NAMES[kind].replace("%d", String(layer));
}

/** What the scale and window functions of an entry may read. */
export interface ArchitectureShape {
  readonly embeddingLength: number;
  readonly headDim: number;
  readonly blockCount: number;
  /** `<prefix>.attention.sliding_window`, 0 when absent. */
  readonly slidingWindow: number;
  /** `<prefix>.attention.sliding_window_pattern`, 0 when absent (the entry's default applies). */
  readonly slidingWindowPattern: number;
  /** `<prefix>.rope.freq_base`. */
  readonly ropeFreqBase: number;
  /** `<prefix>.rope.freq_base_swa` (llama.cpp's default 10000 when absent). */
  readonly ropeFreqBaseSwa: number;
  /** `<prefix>.attention.head_count`. */
  readonly headCount: number;
}

/** One architecture: everything the loader and the forward pass need to know about it. */
export interface Architecture {
  /** The value of `general.architecture`. */
  readonly name: string;
  /** The prefix of its hyper-parameter keys (`<prefix>.embedding_length` ...). */
  readonly keyPrefix: string;
  /** Q/K/V biases (`attn_q.bias` ...). */
  readonly qkvBias: Presence;
  /** Per-head RMSNorm of Q and K after the projection (`attn_q_norm`, `attn_k_norm`). */
  readonly qkNorm: Presence;
  /** RMSNorm of the attention output before the residual add (`post_attention_norm`). */
  readonly postAttentionNorm: Presence;
  /** RMSNorm of the FFN output before the residual add (`post_ffw_norm`). */
  readonly postFfnNorm: Presence;
  /** One `attn_qkv` matrix instead of `attn_q`, `attn_k`, `attn_v`. */
  readonly fusedQkv: boolean;
  /** One `ffn_up` of 2 × ff rows (gate first, then up) instead of `ffn_gate` + `ffn_up`. */
  readonly fusedGateUp: boolean;
  readonly rope: RopeStyle;
  readonly activation: FfnActivation;
  /**
   * `pre`: RMSNorm before attention and FFN, a final `output_norm` (the decoders);
   * `post`: BERT's layer norms with bias after each residual add, an embedding layer norm,
   * learned position and token-type embeddings, biases on every matrix, no LM head.
   */
  readonly norms: NormPlacement;
  /**
   * Whether a token attends only the positions before it (the decoders) or its whole
   * sequence (BERT). `<prefix>.attention.causal` in the file overrides it.
   */
  readonly causal: boolean;
  /** Multiplies Q·K (llama: 1/√headDim). */
  attentionScale(shape: ArchitectureShape): number;
  /**
   * Whether that scale multiplies Q itself, after RoPE and before attention (Gemma:
   * llama.cpp's `ggml_scale(Qcur, f_attention_scale)` then attention with scale 1), instead
   * of the scores. It matters with an F16 cache: Q is rounded to F16 after the scale, and
   * a scaled component below F16's normal range keeps fewer bits.
   */
  readonly scalesQuery: boolean;
  /** Multiplies the embedding rows (llama: 1; Gemma: √embedding). */
  embeddingScale(shape: ArchitectureShape): number;
  /** Layer `layer`'s attention window in positions; 0 = the whole context. */
  layerWindow(shape: ArchitectureShape, layer: number): number;
  /** Layer `layer`'s RoPE frequency base (Gemma 3: its own on sliding-window layers). */
  layerRopeBase(shape: ArchitectureShape, layer: number): number;
}

const llamaLike = {
  qkvBias: "none",
  qkNorm: "none",
  postAttentionNorm: "none",
  postFfnNorm: "none",
  fusedQkv: false,
  fusedGateUp: false,
  rope: "normal",
  activation: "silu",
  norms: "pre",
  causal: true,
  attentionScale: (s: ArchitectureShape) => 1 / Math.sqrt(s.headDim),
  scalesQuery: false,
  embeddingScale: () => 1,
  layerWindow: () => 0,
  layerRopeBase: (s: ArchitectureShape) => s.ropeFreqBase,
} as const satisfies Omit<Architecture, "name" | "keyPrefix">;

/**
 * Gemma 3's sliding-window layers, as llama.cpp's `set_swa_pattern(n)`:
 * with a window, layer `l` slides when `l % n < n - 1` (five of every six
 * for the default n = 6; n = 0 makes every layer slide).
 */
function gemma3Sliding(s: ArchitectureShape, layer: number): boolean {
  if (s.slidingWindow <= 0) return false;
  const n = s.slidingWindowPattern > 0 ? s.slidingWindowPattern : 6;
  return layer % n < n - 1;
}

/** Every architecture this package runs, by `general.architecture`. */
export const ARCHITECTURES: ReadonlyMap<string, Architecture> = new Map<string, Architecture>([
  ["llama", { name: "llama", keyPrefix: "llama", ...llamaLike }],
  // Mistral 7B as `mistral`: the llama graph; when the file gives
  // `mistral.attention.sliding_window`, every layer attends that many positions.
  ["mistral", {
    name: "mistral",
    keyPrefix: "mistral",
    ...llamaLike,
    layerWindow: (s: ArchitectureShape) => s.slidingWindow,
  }],
  // Qwen 2 / 2.5 (llama.cpp's qwen2.cpp): Q/K/V biases, NeoX rope.
  ["qwen2", { name: "qwen2", keyPrefix: "qwen2", ...llamaLike, qkvBias: "optional", rope: "neox" }],
  // Qwen 3 (qwen3.cpp): per-head RMSNorm of Q and K before rope, NeoX rope, no biases.
  ["qwen3", { name: "qwen3", keyPrefix: "qwen3", ...llamaLike, qkNorm: "required", rope: "neox" }],
  // Gemma 3 (gemma3.cpp): embeddings × √embd; Q/K norms; post-attention and post-FFN norms;
  // GELU-tanh gated FFN; Q itself scaled by 1/√key_length (1/√(embd/heads) for the 62-layer
  // 27B) after RoPE, the scores then by 1;
  // sliding window on five layers of six with rope.freq_base_swa, full attention with
  // rope.freq_base on the sixth. Norm weights multiply as stored (the GGUF holds 1 + w).
  ["gemma3", {
    name: "gemma3",
    keyPrefix: "gemma3",
    ...llamaLike,
    qkNorm: "required",
    postAttentionNorm: "required",
    postFfnNorm: "required",
    rope: "neox",
    activation: "gelu_tanh",
    attentionScale: (s: ArchitectureShape) =>
      1 / Math.sqrt(s.blockCount === 62 ? s.embeddingLength / s.headCount : s.headDim),
    scalesQuery: true,
    embeddingScale: (s: ArchitectureShape) => Math.sqrt(s.embeddingLength),
    layerWindow: (s: ArchitectureShape, l: number) => gemma3Sliding(s, l) ? s.slidingWindow : 0,
    layerRopeBase: (s: ArchitectureShape, l: number) =>
      gemma3Sliding(s, l) ? s.ropeFreqBaseSwa : s.ropeFreqBase,
  }],
  // Phi-3 / 3.5 / 4-mini (phi3.cpp): fused QKV and gate+up, NeoX rope, LongRoPE factors when
  // present. llama.cpp disables its sliding window ("Phi SWA is currently disabled"), so
  // `phi3.attention.sliding_window` is read but not applied, as there.
  ["phi3", {
    name: "phi3",
    keyPrefix: "phi3",
    ...llamaLike,
    fusedQkv: true,
    fusedGateUp: true,
    rope: "neox",
  }],
  // BERT (llama.cpp's bert.cpp; all-MiniLM, bge, e5): the sum of token, position and
  // token-type-0 embeddings through a layer norm; each block adds attention (no RoPE, the
  // whole sequence) to its input and layer-norms the sum, then the same with a plain GELU
  // FFN; biases on every matrix. An encoder: its output is the pooled hidden states.
  ["bert", {
    name: "bert",
    keyPrefix: "bert",
    ...llamaLike,
    qkvBias: "required",
    rope: "none",
    activation: "gelu",
    norms: "post",
    causal: false,
  }],
]);

/** The names of the supported architectures, in table order. */
export const SUPPORTED_ARCHITECTURES: readonly string[] = [...ARCHITECTURES.keys()];

/** The entry of `name`; throws {@linkcode ModelError} listing the supported ones. */
export function architectureOf(name: string): Architecture {
  const arch = ARCHITECTURES.get(name);
  if (arch === undefined) {
    throw new ModelError(
      `unsupported architecture "${name}" (supported: ${SUPPORTED_ARCHITECTURES.join(", ")})`,
    );
  }
  return arch;
}

/**
 * One line naming what distinguishes a model of `arch` (for `dotllm run`'s
 * summary): head layout, RoPE style and base, windows, activation and the
 * optional steps it runs.
 *
 * @example
 * ```ts
 * import { architectureOf, describeArchitecture } from "./arch.ts";
 * const shape = {
 *   embeddingLength: 640, headDim: 256, headCount: 4, blockCount: 18, slidingWindow: 512,
 *   slidingWindowPattern: 0, ropeFreqBase: 1e6, ropeFreqBaseSwa: 10000,
 * };
 * console.log(describeArchitecture(architectureOf("gemma3"), shape, 1));
 * // gemma3: 4 heads / 1 KV × 256, NeoX rope 1000000, sliding window 512 on 15 of 18 layers
 * // (rope 10000), GELU-tanh, Q/K norms, post norms, embeddings ×25.3
 * ```
 */
export function describeArchitecture(
  arch: Architecture,
  shape: ArchitectureShape,
  headCountKv: number,
): string {
  const parts = [
    `${shape.headCount} heads / ${headCountKv} KV × ${shape.headDim}`,
    arch.rope === "none"
      ? "absolute positions"
      : `${arch.rope === "neox" ? "NeoX" : "normal"} rope ${shape.ropeFreqBase}`,
  ];
  const windowed = Array.from({ length: shape.blockCount }, (_, l) => l)
    .filter((l) => arch.layerWindow(shape, l) > 0);
  if (windowed.length > 0) {
    const bases = new Set(windowed.map((l) => arch.layerRopeBase(shape, l)));
    const base = bases.size === 1 && !bases.has(shape.ropeFreqBase)
      ? ` (rope ${[...bases][0]})`
      : "";
    parts.push(
      `sliding window ${arch.layerWindow(shape, windowed[0])} on ${windowed.length} of ` +
        `${shape.blockCount} layers${base}`,
    );
  }
  parts.push(
    arch.activation === "gelu_tanh" ? "GELU-tanh" : arch.activation === "gelu" ? "GELU" : "SiLU",
  );
  if (arch.norms === "post") parts.push("post layer norms");
  if (!arch.causal) parts.push("bidirectional");
  if (arch.qkvBias !== "none") parts.push("Q/K/V biases");
  if (arch.qkNorm !== "none") parts.push("Q/K norms");
  if (arch.postAttentionNorm !== "none") parts.push("post norms");
  if (arch.fusedQkv) parts.push("fused QKV");
  if (arch.fusedGateUp) parts.push("fused gate+up");
  const e = arch.embeddingScale(shape);
  if (e !== 1) parts.push(`embeddings ×${e.toFixed(1)}`);
  return `${arch.name}: ${parts.join(", ")}`;
}

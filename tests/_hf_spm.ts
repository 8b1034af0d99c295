/**
 * Synthetic Hugging Face folders whose tokenizer is a SentencePiece
 * `tokenizer.model`, for the converter's tests. Weights are F32 from a seeded
 * generator (the same bytes on every machine) in Hugging Face's layout; each
 * folder has `config.json` and `tokenizer_config.json` (added tokens, special
 * ids, a real chat template from the test data where the family has one).
 *
 * - `gemma3-spm-tiny`, `phi3-spm-tiny`, `llama-spm-tiny`: `Gemma3ForCausalLM`,
 *   `Phi3ForCausalLM`, `LlamaForCausalLM` with sentencepiece's real BPE test
 *   model (`_sentencepiece.ts`); `gemma3-spm-tiny-bf16`: the Gemma folder in
 *   BF16, as Gemma 3 is published; `phi3-longrope-spm-tiny`: Phi-3 with
 *   LongRoPE factors (Phi-3.5-mini, Phi-3-mini-128k).
 * - `llama2-vocab-spm-tiny`, `codellama-vocab-spm-tiny`: a `tokenizer.model`
 *   holding Llama 2's 32000-piece byte-fallback vocabulary (written from the test
 *   data's llama-2-tiny-random.gguf), with Llama 2's `tokenizer.json` special
 *   parts; CodeLlama's 32016 tokens.
 *
 * A folder is made once into `models/hf-<name>/` and again when its spec changes.
 *
 * ```ts
 * import { ensureHfSpm } from "./_hf_spm.ts";
 * const dir = ensureHfSpm("gemma3-spm-tiny"); // models/hf-gemma3-spm-tiny
 * ```
 *
 * @module
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type GgufArray, parseGguf } from "../src/gguf/reader.ts";
import { prng } from "./_fuzz.ts";
import { ensureSentencePieceModels } from "./_sentencepiece.ts";
import { repoRoot, testdata } from "./_testdata.ts";

/** The folders this module makes. */
export const HF_SPM_SHAPES = [
  "gemma3-spm-tiny",
  "phi3-spm-tiny",
  "llama-spm-tiny",
  "gemma3-spm-tiny-bf16",
  "phi3-longrope-spm-tiny",
  "llama2-vocab-spm-tiny",
  "codellama-vocab-spm-tiny",
] as const;
/** One of {@linkcode HF_SPM_SHAPES}. */
export type HfSpmShape = typeof HF_SPM_SHAPES[number];

/** The pieces of the tokenizer.model. */
const PIECES = 1000;

type Json = Record<string, unknown>;

interface Spec {
  config: Json;
  tensors: [string, number[]][];
  tokenizerConfig: Json;
  /** A `tokenizer.json` holding only added tokens (Phi-3's converter reads them). */
  tokenizerJson?: Json;
  /** Scale of the random weights. */
  std: number;
  /** The norms' centre: 1, or 0 for Gemma (its model multiplies by 1 + w). */
  normBase: number;
  /** The weights' dtype (F32 unless said). */
  dtype?: "F32" | "BF16";
  /** The tokenizer.model's bytes, when not sentencepiece's BPE test model. */
  tokenizerModel?: () => Uint8Array;
}

const added = (content: string, special: boolean) => ({
  content,
  lstrip: false,
  normalized: false,
  rstrip: false,
  single_word: false,
  special,
});

function template(name: string): string {
  return readFileSync(testdata("chat", "templates", name), "utf8");
}

function layerTensors(
  layers: number,
  f: (l: number) => [string, number[]][],
): [string, number[]][] {
  return Array.from({ length: layers }, (_, l) => f(l)).flat();
}

function spec(shape: HfSpmShape): Spec {
  const E = 64, F = 128;
  if (shape === "gemma3-spm-tiny-bf16") {
    const s = spec("gemma3-spm-tiny");
    return { ...s, dtype: "BF16", config: { ...s.config, torch_dtype: "bfloat16" } };
  }
  if (shape === "codellama-vocab-spm-tiny") {
    // CodeLlama's 32016 tokens: Llama 2's pieces, then its infill tokens ▁<PRE> ▁<SUF> ▁<MID>
    // ▁<EOT> (32007-32010) as added tokens; the converter gives EOT an id of its own.
    const s = spec("llama2-vocab-spm-tiny");
    const V = 32016;
    const infill = ["\u2581<PRE>", "\u2581<SUF>", "\u2581<MID>", "\u2581<EOT>"];
    const decoder = Object.fromEntries(infill.map((t, i) => [String(32007 + i), added(t, true)]));
    return {
      ...s,
      config: { ...s.config, vocab_size: V },
      tensors: s.tensors.map(([n, shape]) =>
        n === "model.embed_tokens.weight" ? [n, [V, shape[1]]] : [n, shape]
      ),
      tokenizerConfig: {
        ...s.tokenizerConfig,
        prefix_token: infill[0],
        suffix_token: infill[1],
        middle_token: infill[2],
        eot_token: infill[3],
        fill_token: "<FILL_ME>",
        added_tokens_decoder: decoder,
        tokenizer_class: "CodeLlamaTokenizer",
      },
      tokenizerJson: {
        ...s.tokenizerJson,
        added_tokens: [
          ...(s.tokenizerJson!.added_tokens as unknown[]),
          ...infill.map((t, i) => ({ id: 32007 + i, ...added(t, true) })),
        ],
      },
    };
  }
  if (shape === "llama2-vocab-spm-tiny") {
    // Llama 2's 32000-piece vocabulary (byte fallback, 256 byte pieces) as a tokenizer.model.
    const V = 32000, E2 = 32, H = 2, L = 1;
    return {
      std: 0.25,
      normBase: 1,
      tokenizerModel: llama2TokenizerModel,
      config: {
        architectures: ["LlamaForCausalLM"],
        model_type: "llama",
        hidden_size: E2,
        intermediate_size: F,
        num_attention_heads: H,
        num_key_value_heads: H,
        num_hidden_layers: L,
        max_position_embeddings: 4096,
        rms_norm_eps: 1e-5,
        vocab_size: V,
        tie_word_embeddings: true,
        bos_token_id: 1,
        eos_token_id: 2,
        torch_dtype: "float32",
      },
      tensors: [
        ["model.embed_tokens.weight", [V, E2]],
        ["model.norm.weight", [E2]],
        ...layerTensors(L, (l): [string, number[]][] => [
          [`model.layers.${l}.input_layernorm.weight`, [E2]],
          [`model.layers.${l}.self_attn.q_proj.weight`, [E2, E2]],
          [`model.layers.${l}.self_attn.k_proj.weight`, [E2, E2]],
          [`model.layers.${l}.self_attn.v_proj.weight`, [E2, E2]],
          [`model.layers.${l}.self_attn.o_proj.weight`, [E2, E2]],
          [`model.layers.${l}.post_attention_layernorm.weight`, [E2]],
          [`model.layers.${l}.mlp.gate_proj.weight`, [F, E2]],
          [`model.layers.${l}.mlp.up_proj.weight`, [F, E2]],
          [`model.layers.${l}.mlp.down_proj.weight`, [E2, F]],
        ]),
      ],
      tokenizerConfig: {
        add_bos_token: true,
        add_eos_token: false,
        bos_token: { __type: "AddedToken", content: "<s>", special: true },
        eos_token: { __type: "AddedToken", content: "</s>", special: true },
        unk_token: { __type: "AddedToken", content: "<unk>", special: true },
        legacy: false,
        tokenizer_class: "LlamaTokenizer",
      },
      // Llama 2 folders ship tokenizer.json beside tokenizer.model; gguf-py's SpecialVocab reads
      // its added tokens, normalizer and post-processor (these are Llama 2's; its BPE model,
      // which the conversion does not read, is left out).
      tokenizerJson: {
        version: "1.0",
        added_tokens: [
          { id: 0, ...added("<unk>", true) },
          { id: 1, ...added("<s>", true) },
          { id: 2, ...added("</s>", true) },
        ],
        normalizer: {
          type: "Sequence",
          normalizers: [
            { type: "Prepend", prepend: "\u2581" },
            { type: "Replace", pattern: { String: " " }, content: "\u2581" },
          ],
        },
        post_processor: {
          type: "TemplateProcessing",
          single: [
            { SpecialToken: { id: "<s>", type_id: 0 } },
            { Sequence: { id: "A", type_id: 0 } },
          ],
          pair: [
            { SpecialToken: { id: "<s>", type_id: 0 } },
            { Sequence: { id: "A", type_id: 0 } },
            { SpecialToken: { id: "<s>", type_id: 1 } },
            { Sequence: { id: "B", type_id: 1 } },
          ],
          special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } },
        },
        model: { type: "BPE", byte_fallback: true, vocab: {}, merges: [] },
      },
    };
  }
  if (shape === "phi3-longrope-spm-tiny") {
    // Phi-3-mini-128k / Phi-3.5-mini's LongRoPE: per-dimension factors for short and long
    // contexts past the original 4096 positions.
    const s = spec("phi3-spm-tiny");
    return {
      ...s,
      config: {
        ...s.config,
        max_position_embeddings: 131072,
        rope_scaling: {
          type: "longrope",
          long_factor: Array.from({ length: 8 }, (_, i) => 1 + 0.5 * i),
          short_factor: Array.from({ length: 8 }, (_, i) => 1 + 0.125 * i),
        },
      },
    };
  }
  if (shape === "gemma3-spm-tiny") {
    // 6 layers: five sliding-window layers and one global, as Gemma 3 alternates them. The
    // embedding has 16 rows past vocab_size (the converter drops them, as for Gemma 3).
    const V = 1024, H = 4, KV = 1, D = 16, L = 6;
    return {
      std: 0.125,
      normBase: 0,
      config: {
        architectures: ["Gemma3ForCausalLM"],
        model_type: "gemma3_text",
        hidden_size: E,
        intermediate_size: F,
        num_attention_heads: H,
        num_key_value_heads: KV,
        head_dim: D,
        num_hidden_layers: L,
        max_position_embeddings: 2048,
        rms_norm_eps: 1e-6,
        rope_theta: 1000000.0,
        rope_local_base_freq: 10000.0,
        sliding_window: 16,
        sliding_window_pattern: 6,
        query_pre_attn_scalar: D,
        vocab_size: V,
        hidden_activation: "gelu_pytorch_tanh",
        bos_token_id: 1,
        eos_token_id: 2,
        pad_token_id: 0,
        torch_dtype: "float32",
      },
      tensors: [
        ["model.embed_tokens.weight", [V + 16, E]],
        ["model.norm.weight", [E]],
        ...layerTensors(L, (l): [string, number[]][] => [
          [`model.layers.${l}.input_layernorm.weight`, [E]],
          [`model.layers.${l}.self_attn.q_proj.weight`, [H * D, E]],
          [`model.layers.${l}.self_attn.k_proj.weight`, [KV * D, E]],
          [`model.layers.${l}.self_attn.v_proj.weight`, [KV * D, E]],
          [`model.layers.${l}.self_attn.o_proj.weight`, [E, H * D]],
          [`model.layers.${l}.self_attn.q_norm.weight`, [D]],
          [`model.layers.${l}.self_attn.k_norm.weight`, [D]],
          [`model.layers.${l}.post_attention_layernorm.weight`, [E]],
          [`model.layers.${l}.pre_feedforward_layernorm.weight`, [E]],
          [`model.layers.${l}.post_feedforward_layernorm.weight`, [E]],
          [`model.layers.${l}.mlp.gate_proj.weight`, [F, E]],
          [`model.layers.${l}.mlp.up_proj.weight`, [F, E]],
          [`model.layers.${l}.mlp.down_proj.weight`, [E, F]],
        ]),
      ],
      tokenizerConfig: {
        add_bos_token: true,
        add_eos_token: false,
        bos_token: "<s>",
        eos_token: "</s>",
        unk_token: "<unk>",
        pad_token: "<unk>",
        added_tokens_decoder: {
          "0": added("<unk>", true),
          "1": added("<s>", true),
          "2": added("</s>", true),
          "1000": added("<start_of_turn>", true),
          "1001": added("<end_of_turn>", true),
          "1002": added("<unused0>", false), // looks special: a control token
          "1003": added("\u2581\u2581two", false), // user-defined, ▁ written as spaces
        },
        chat_template: template("google-gemma-2-2b-it.jinja"),
        tokenizer_class: "GemmaTokenizer",
      },
    };
  }
  if (shape === "phi3-spm-tiny") {
    const V = 1024, H = 4, L = 2;
    return {
      std: 0.125,
      normBase: 1,
      config: {
        architectures: ["Phi3ForCausalLM"],
        model_type: "phi3",
        hidden_size: E,
        intermediate_size: F,
        num_attention_heads: H,
        num_key_value_heads: H,
        num_hidden_layers: L,
        max_position_embeddings: 4096,
        original_max_position_embeddings: 4096,
        rms_norm_eps: 1e-5,
        rope_theta: 10000.0,
        rope_scaling: null,
        sliding_window: 2047,
        vocab_size: V,
        tie_word_embeddings: false,
        bos_token_id: 1,
        eos_token_id: 1000,
        pad_token_id: 1000,
        torch_dtype: "float32",
      },
      tensors: [
        ["model.embed_tokens.weight", [V, E]],
        ["model.norm.weight", [E]],
        ["lm_head.weight", [V, E]],
        ...layerTensors(L, (l): [string, number[]][] => [
          [`model.layers.${l}.input_layernorm.weight`, [E]],
          [`model.layers.${l}.self_attn.qkv_proj.weight`, [3 * E, E]],
          [`model.layers.${l}.self_attn.o_proj.weight`, [E, E]],
          [`model.layers.${l}.post_attention_layernorm.weight`, [E]],
          [`model.layers.${l}.mlp.gate_up_proj.weight`, [2 * F, E]],
          [`model.layers.${l}.mlp.down_proj.weight`, [E, F]],
        ]),
      ],
      tokenizerConfig: {
        add_bos_token: false,
        add_eos_token: false,
        bos_token: "<s>",
        eos_token: "<|endoftext|>",
        unk_token: "<unk>",
        pad_token: "<|endoftext|>",
        added_tokens_decoder: {
          "0": added("<unk>", true),
          "1": added("<s>", true),
          "2": added("</s>", false),
          "1000": added("<|endoftext|>", true),
          "1001": added("<|assistant|>", true),
          "1002": added("<|end|>", true),
          "1003": added("<|user|>", true),
          "1004": added("<|placeholder1|>", false),
        },
        chat_template: template("microsoft-Phi-3.5-mini-instruct.jinja"),
        tokenizer_class: "LlamaTokenizer",
      },
      tokenizerJson: {
        version: "1.0",
        added_tokens: [
          { id: 1000, ...added("<|endoftext|>", true) },
          { id: 1001, ...added("<|assistant|>", true) },
          { id: 1005, ...added("<|system|>", true) },
        ],
      },
    };
  }
  const V = PIECES, H = 4, KV = 2, L = 2;
  return {
    std: 0.125,
    normBase: 1,
    config: {
      architectures: ["LlamaForCausalLM"],
      model_type: "llama",
      hidden_size: E,
      intermediate_size: F,
      num_attention_heads: H,
      num_key_value_heads: KV,
      num_hidden_layers: L,
      max_position_embeddings: 2048,
      rms_norm_eps: 1e-5,
      rope_theta: 10000.0,
      vocab_size: V,
      tie_word_embeddings: false,
      bos_token_id: 1,
      eos_token_id: 2,
      torch_dtype: "float32",
    },
    tensors: [
      ["model.embed_tokens.weight", [V, E]],
      ["model.norm.weight", [E]],
      ["lm_head.weight", [V, E]],
      ...layerTensors(L, (l): [string, number[]][] => [
        [`model.layers.${l}.input_layernorm.weight`, [E]],
        [`model.layers.${l}.self_attn.q_proj.weight`, [H * 16, E]],
        [`model.layers.${l}.self_attn.k_proj.weight`, [KV * 16, E]],
        [`model.layers.${l}.self_attn.v_proj.weight`, [KV * 16, E]],
        [`model.layers.${l}.self_attn.o_proj.weight`, [E, H * 16]],
        [`model.layers.${l}.post_attention_layernorm.weight`, [E]],
        [`model.layers.${l}.mlp.gate_proj.weight`, [F, E]],
        [`model.layers.${l}.mlp.up_proj.weight`, [F, E]],
        [`model.layers.${l}.mlp.down_proj.weight`, [E, F]],
      ]),
    ],
    // No added tokens, no template: only the tokenizer.model and the BOS flag (Llama 2's).
    tokenizerConfig: {
      add_bos_token: true,
      add_eos_token: false,
      tokenizer_class: "LlamaTokenizer",
    },
  };
}

function toBf16(values: Float32Array): Uint8Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    const n = bits[i];
    out[i] = Math.floor((n + 0x7fff + ((n >>> 16) & 1)) / 65536) & 0xffff;
  }
  return new Uint8Array(out.buffer);
}

/** The safetensors bytes of `tensors` (sorted by name, as Hugging Face writes them). */
function safetensors(s: Spec, seed: number): Uint8Array {
  const { tensors, std, normBase } = s;
  const bf16 = s.dtype === "BF16";
  const random = prng(seed);
  const sorted = [...tensors].sort(([a], [b]) => (a < b ? -1 : 1));
  const header: Json = { __metadata__: { format: "pt" } };
  const datas: Uint8Array[] = [];
  let offset = 0;
  for (const [name, shape] of sorted) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    // Norms in their centre ± 0.5, matrices uniform of standard deviation `std`.
    for (let i = 0; i < n; i++) {
      const u = random() * 2 - 1;
      data[i] = shape.length === 1 ? normBase + 0.5 * u : u * std * Math.sqrt(3);
    }
    // BF16: the f32 values rounded to nearest even (as torch's .to(torch.bfloat16)).
    const bytes = bf16 ? toBf16(data) : new Uint8Array(data.buffer);
    header[name] = {
      dtype: bf16 ? "BF16" : "F32",
      shape,
      data_offsets: [offset, offset + bytes.byteLength],
    };
    datas.push(bytes);
    offset += bytes.byteLength;
  }
  const h = new TextEncoder().encode(JSON.stringify(header));
  const file = new Uint8Array(8 + h.length + offset);
  new DataView(file.buffer).setBigUint64(0, BigInt(h.length), true);
  file.set(h, 8);
  let at = 8 + h.length;
  for (const d of datas) {
    file.set(d, at);
    at += d.byteLength;
  }
  return file;
}

// ---------------------------------------------------------------------------
// A ModelProto writer (protobuf wire format), for Llama 2's vocabulary

function varint(n: number): number[] {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? b | 0x80 : b);
  } while (v > 0n);
  return out;
}
const field = (n: number, wire: number) => varint((n << 3) | wire);
const bytes = (n: number, data: number[] | Uint8Array) => [
  ...field(n, 2),
  ...varint(data.length),
  ...data,
];
const int = (n: number, v: number) => [...field(n, 0), ...varint(v)];

/**
 * A `tokenizer.model` holding the vocabulary of the test data's
 * llama-2-tiny-random.gguf (Llama 2's pieces, scores and types, written there by
 * llama.cpp from Llama 2's own tokenizer.model) with Llama 2's trainer and
 * normalizer settings: BPE, byte fallback, ids 0/1/2, the identity normalizer.
 */
export function llama2TokenizerModel(): Uint8Array {
  const gguf = parseGguf(readFileSync(testdata("models", "llama-2-tiny-random.gguf")));
  const values = (key: string) => (gguf.metadata.get(key) as GgufArray).values;
  const tokens = values("tokenizer.ggml.tokens") as string[];
  const scores = values("tokenizer.ggml.scores") as ArrayLike<number>;
  const types = values("tokenizer.ggml.token_type") as ArrayLike<number>;
  const out: number[] = [];
  const encoder = new TextEncoder();
  for (let i = 0; i < tokens.length; i++) {
    const score = new Uint8Array(new Float32Array([scores[i]]).buffer);
    out.push(...bytes(1, [
      ...bytes(1, encoder.encode(tokens[i])),
      ...field(2, 5),
      ...score,
      ...(types[i] === 1 ? [] : int(3, types[i])),
    ]));
  }
  out.push(...bytes(2, [
    ...int(3, 2), // BPE
    ...int(4, tokens.length),
    ...int(35, 1), // byte_fallback
    ...int(40, 0),
    ...int(41, 1),
    ...int(42, 2),
    ...int(43, -1),
  ]));
  out.push(...bytes(3, [...bytes(1, encoder.encode("identity")), ...int(4, 0)]));
  return new Uint8Array(out);
}

/** Makes the folder of `shape` when missing; returns its path. */
export function ensureHfSpm(shape: HfSpmShape): string {
  const dir = join(repoRoot, "models", `hf-${shape}`);
  const s = spec(shape);
  // Seeds follow the order of HF_SPM_SHAPES: new shapes go at its end.
  const seed = HF_SPM_SHAPES.indexOf(shape) + 40;
  // A folder made from another version of its spec is made again.
  const stamp = JSON.stringify({ ...s, seed, tokenizerModel: s.tokenizerModel !== undefined });
  const stampFile = join(dir, ".spec.json");
  if (
    existsSync(join(dir, "model.safetensors")) && existsSync(stampFile) &&
    readFileSync(stampFile, "utf8") === stamp
  ) return dir;
  const models = ensureSentencePieceModels();
  const tmp = `${dir}.tmp-${Deno.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  if (s.tokenizerModel) writeFileSync(join(tmp, "tokenizer.model"), s.tokenizerModel());
  else copyFileSync(join(models, "botchan_en_bpe_1000.model"), join(tmp, "tokenizer.model"));
  writeFileSync(join(tmp, "config.json"), JSON.stringify(s.config, null, 2));
  writeFileSync(join(tmp, "tokenizer_config.json"), JSON.stringify(s.tokenizerConfig, null, 2));
  if (s.tokenizerJson) {
    writeFileSync(join(tmp, "tokenizer.json"), JSON.stringify(s.tokenizerJson, null, 2));
  }
  writeFileSync(join(tmp, "model.safetensors"), safetensors(s, seed));
  writeFileSync(join(tmp, ".spec.json"), stamp);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

if (import.meta.main) {
  for (const shape of Deno.args.length > 0 ? Deno.args : HF_SPM_SHAPES) {
    console.log(ensureHfSpm(shape as HfSpmShape));
  }
}

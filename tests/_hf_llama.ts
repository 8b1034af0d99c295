/**
 * A synthetic Hugging Face Llama folder (safetensors, `config.json`, SmolLM2's
 * `tokenizer.json`): the weights of `make-model`'s `tiny` shape written back
 * in Hugging Face's layout (names, row-major shapes, Q/K rows in its RoPE
 * order), deterministic, made once into `models/hf-llama-tiny/`.
 *
 * @module
 */
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { parseGguf } from "../src/gguf/reader.ts";
import { makeModel } from "../src/gguf/make_model.ts";
import { repoRoot, testdata } from "./_testdata.ts";

/** The folder (its name becomes the converted file's `general.name`). */
export const hfLlamaDir: string = join(repoRoot, "models", "hf-llama-tiny");

/** The make-model shapes written as Hugging Face folders, with their class and tokenizer. */
const HF_SHAPES = {
  tiny: { dir: "hf-llama-tiny", arch: "LlamaForCausalLM", type: "llama", tokenizer: "smollm2" },
  "qwen2-tiny": {
    dir: "hf-qwen2-tiny",
    arch: "Qwen2ForCausalLM",
    type: "qwen2",
    tokenizer: "qwen3",
  },
  "qwen3-tiny": {
    dir: "hf-qwen3-tiny",
    arch: "Qwen3ForCausalLM",
    type: "qwen3",
    tokenizer: "qwen3",
  },
} as const;

/** A shape's folder name. */
export type HfShape = keyof typeof HF_SHAPES;

const HF_NAMES: [RegExp, string][] = [
  [/^token_embd\.weight$/, "model.embed_tokens.weight"],
  [/^output_norm\.weight$/, "model.norm.weight"],
  [/^output\.weight$/, "lm_head.weight"],
  [/^blk\.(\d+)\.attn_norm\.weight$/, "model.layers.$1.input_layernorm.weight"],
  [/^blk\.(\d+)\.attn_q\.weight$/, "model.layers.$1.self_attn.q_proj.weight"],
  [/^blk\.(\d+)\.attn_k\.weight$/, "model.layers.$1.self_attn.k_proj.weight"],
  [/^blk\.(\d+)\.attn_v\.weight$/, "model.layers.$1.self_attn.v_proj.weight"],
  [/^blk\.(\d+)\.attn_output\.weight$/, "model.layers.$1.self_attn.o_proj.weight"],
  [/^blk\.(\d+)\.ffn_norm\.weight$/, "model.layers.$1.post_attention_layernorm.weight"],
  [/^blk\.(\d+)\.ffn_gate\.weight$/, "model.layers.$1.mlp.gate_proj.weight"],
  [/^blk\.(\d+)\.ffn_up\.weight$/, "model.layers.$1.mlp.up_proj.weight"],
  [/^blk\.(\d+)\.ffn_down\.weight$/, "model.layers.$1.mlp.down_proj.weight"],
  [/^blk\.(\d+)\.attn_q\.bias$/, "model.layers.$1.self_attn.q_proj.bias"],
  [/^blk\.(\d+)\.attn_k\.bias$/, "model.layers.$1.self_attn.k_proj.bias"],
  [/^blk\.(\d+)\.attn_v\.bias$/, "model.layers.$1.self_attn.v_proj.bias"],
  [/^blk\.(\d+)\.attn_q_norm\.weight$/, "model.layers.$1.self_attn.q_norm.weight"],
  [/^blk\.(\d+)\.attn_k_norm\.weight$/, "model.layers.$1.self_attn.k_norm.weight"],
];

/** Hugging Face's Q/K row order: GGUF row r is HF row `hfRow(r)` (the converter's permute, inverted). */
function hfRow(r: number, rows: number, heads: number): number {
  const half = rows / heads / 2;
  const head = Math.floor(r / (2 * half)), rest = r % (2 * half);
  return head * 2 * half + (rest % 2) * half + Math.floor(rest / 2);
}

/** Makes the Llama folder when missing; returns its path. */
export function ensureHfLlama(): string {
  return ensureHfModel("tiny");
}

/** Makes the folder of `shape` when missing; returns its path. */
export function ensureHfModel(shape: HfShape): string {
  const spec = HF_SHAPES[shape];
  const dir = join(repoRoot, "models", spec.dir);
  if (existsSync(join(dir, "model.safetensors"))) return dir;
  const { path } = makeModel({
    shape,
    type: "f32",
    outDir: join(repoRoot, "models"),
    vocabDir: testdata("vocab-converted"),
  });
  const bytes = readFileSync(path);
  const gguf = parseGguf(bytes);
  const m = gguf.metadata;
  const a = spec.type;
  const heads = m.get(`${a}.attention.head_count`) as number;
  const kvHeads = m.get(`${a}.attention.head_count_kv`) as number;
  const tensors = gguf.tensors.map((t) => {
    const entry = HF_NAMES.find(([re]) => re.test(t.name));
    if (entry === undefined) throw new Error(`no Hugging Face name for ${t.name}`);
    const name = t.name.replace(entry[0], entry[1]);
    const shape = [...t.dims].reverse();
    const src = new Float32Array(
      bytes.buffer.slice(
        bytes.byteOffset + t.dataOffset,
        bytes.byteOffset + t.dataOffset + t.sizeBytes,
      ),
    );
    let data = src;
    const h = t.name.endsWith("attn_q.weight")
      ? heads
      : t.name.endsWith("attn_k.weight")
      ? kvHeads
      : 0;
    if (h > 0) {
      const [rows, cols] = shape;
      data = new Float32Array(src.length);
      for (let r = 0; r < rows; r++) {
        data.set(src.subarray(r * cols, (r + 1) * cols), hfRow(r, rows, h) * cols);
      }
    }
    return { name, shape, data };
  }).sort((a, b) => (a.name < b.name ? -1 : 1));
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = {
      dtype: "F32",
      shape: t.shape,
      data_offsets: [offset, offset + t.data.byteLength],
    };
    offset += t.data.byteLength;
  }
  const headerBytes = new TextEncoder().encode(JSON.stringify(header));
  const file = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(file.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  file.set(headerBytes, 8);
  let at = 8 + headerBytes.length;
  for (const t of tensors) {
    file.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), at);
    at += t.data.byteLength;
  }
  const tmp = `${dir}.tmp-${Deno.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(join(tmp, "model.safetensors"), file);
  writeFileSync(
    join(tmp, "config.json"),
    JSON.stringify(
      {
        architectures: [spec.arch],
        model_type: a,
        hidden_size: m.get(`${a}.embedding_length`),
        intermediate_size: m.get(`${a}.feed_forward_length`),
        num_attention_heads: heads,
        num_key_value_heads: kvHeads,
        ...(a === "qwen3" ? { head_dim: m.get("qwen3.attention.key_length") } : {}),
        num_hidden_layers: m.get(`${a}.block_count`),
        max_position_embeddings: m.get(`${a}.context_length`),
        rms_norm_eps: a === "llama" ? 1e-5 : 1e-6,
        rope_theta: a === "llama" ? 100000.0 : m.get(`${a}.rope.freq_base`),
        vocab_size: gguf.tensorsByName.get("token_embd.weight")!.dims[1],
        tie_word_embeddings: true,
        bos_token_id: a === "llama" ? 1 : 151643,
        eos_token_id: a === "llama" ? 2 : 151645,
        torch_dtype: "float32",
      },
      null,
      2,
    ),
  );
  for (const f of ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]) {
    const from = testdata("tokenizers", spec.tokenizer, f);
    if (existsSync(from)) copyFileSync(from, join(tmp, f));
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

if (import.meta.main) {
  for (const shape of Deno.args.length > 0 ? Deno.args : ["tiny"]) {
    console.log(ensureHfModel(shape as HfShape));
  }
}

/**
 * The ported llama-quant rules, without files: per-tensor types of the mixes on
 * a Llama-3.2-1B-shaped tensor list (rows of 2048/8192, real K-quant blocks), the
 * fallbacks for rows that are not a multiple of 256, what is never quantized,
 * the options, type names and tensor order; and llama-quantize's own choices
 * (tests/golden/quantize_policy.json, from its --dry-run) on synthetic files.
 */
import assert from "node:assert/strict";
import { GGML_TYPES } from "../src/gguf/types.ts";
import { parseGgmlTypeName, parseQuantType, QUANT_TYPES, T } from "../src/quantize/ftype.ts";
import {
  compareTensorNames,
  planTensorTypes,
  type PolicyModel,
  type PolicyTensor,
} from "../src/quantize/policy.ts";

const F32 = 0;

/** The tensors of a Llama 3.2 1B (tied embeddings), in llama.cpp's order. */
function llama1b(layers = 16, output = false): PolicyTensor[] {
  const embd = 2048, ff = 8192, kv = 512, vocab = 128256;
  const t: PolicyTensor[] = [
    { name: "output_norm.weight", dims: [embd], type: F32 },
    { name: "rope_freqs.weight", dims: [32], type: F32 },
    { name: "token_embd.weight", dims: [embd, vocab], type: F32 },
  ];
  if (output) t.push({ name: "output.weight", dims: [embd, vocab], type: F32 });
  for (let i = 0; i < layers; i++) {
    t.push(
      { name: `blk.${i}.attn_k.weight`, dims: [embd, kv], type: F32 },
      { name: `blk.${i}.attn_norm.weight`, dims: [embd], type: F32 },
      { name: `blk.${i}.attn_output.weight`, dims: [embd, embd], type: F32 },
      { name: `blk.${i}.attn_q.weight`, dims: [embd, embd], type: F32 },
      { name: `blk.${i}.attn_v.weight`, dims: [embd, kv], type: F32 },
      { name: `blk.${i}.ffn_down.weight`, dims: [ff, embd], type: F32 },
      { name: `blk.${i}.ffn_gate.weight`, dims: [embd, ff], type: F32 },
      { name: `blk.${i}.ffn_norm.weight`, dims: [embd], type: F32 },
      { name: `blk.${i}.ffn_up.weight`, dims: [embd, ff], type: F32 },
    );
  }
  return t.sort((a, b) => compareTensorNames(a.name, b.name));
}

const LLAMA_1B: PolicyModel = { arch: "llama", layerCount: 16, headCount: 32, headCountKv: 8 };

function typesOf(
  mix: string,
  tensors = llama1b(),
  model = LLAMA_1B,
  extra: Partial<Parameters<typeof planTensorTypes>[2]> = {},
) {
  const q = parseQuantType(mix)!;
  const plan = planTensorTypes(tensors, model, { ftype: q.ftype, ...extra });
  return new Map(tensors.map((t, i) => [t.name, plan.types[i]]));
}

/** llama.cpp's use_more_bits(i, 16): the first two, the last two, and every third between. */
const MORE_BITS_16 = [0, 1, 4, 7, 10, 13, 14, 15];

Deno.test("policy: Q4_K_M gives attn_v and ffn_down Q6_K on use_more_bits layers", () => {
  const types = typesOf("Q4_K_M");
  assert.equal(types.get("token_embd.weight"), T.Q6_K, "tied embeddings take the output rule");
  assert.equal(types.get("output_norm.weight"), F32);
  assert.equal(types.get("rope_freqs.weight"), F32);
  for (let i = 0; i < 16; i++) {
    const more = MORE_BITS_16.includes(i);
    assert.equal(types.get(`blk.${i}.attn_v.weight`), more ? T.Q6_K : T.Q4_K, `attn_v ${i}`);
    assert.equal(types.get(`blk.${i}.ffn_down.weight`), more ? T.Q6_K : T.Q4_K, `ffn_down ${i}`);
    for (const n of ["attn_k", "attn_q", "attn_output", "ffn_gate", "ffn_up"]) {
      assert.equal(types.get(`blk.${i}.${n}.weight`), T.Q4_K, `${n} ${i}`);
    }
    assert.equal(types.get(`blk.${i}.attn_norm.weight`), F32);
  }
});

Deno.test("policy: Q4_K_S, Q3_K_M, Q3_K_L, Q2_K, Q5_K_M, Q6_K per-tensor choices", () => {
  const s = typesOf("Q4_K_S");
  for (let i = 0; i < 16; i++) {
    assert.equal(s.get(`blk.${i}.attn_v.weight`), i < 4 ? T.Q5_K : T.Q4_K);
    assert.equal(s.get(`blk.${i}.ffn_down.weight`), i < 2 ? T.Q5_K : T.Q4_K);
  }
  const m3 = typesOf("Q3_K_M");
  for (let i = 0; i < 16; i++) {
    assert.equal(m3.get(`blk.${i}.attn_v.weight`), i < 2 ? T.Q5_K : T.Q4_K);
    assert.equal(m3.get(`blk.${i}.ffn_down.weight`), i < 1 ? T.Q5_K : T.Q4_K);
    assert.equal(m3.get(`blk.${i}.attn_output.weight`), T.Q4_K);
    assert.equal(m3.get(`blk.${i}.attn_q.weight`), T.Q3_K);
  }
  const l3 = typesOf("Q3_K_L");
  assert.equal(l3.get("blk.5.attn_v.weight"), T.Q5_K);
  assert.equal(l3.get("blk.5.ffn_down.weight"), T.Q5_K);
  assert.equal(l3.get("blk.5.attn_output.weight"), T.Q5_K);
  const s3 = typesOf("Q3_K_S");
  assert.equal(s3.get("blk.5.attn_v.weight"), T.Q3_K);
  const q2 = typesOf("Q2_K");
  assert.equal(q2.get("blk.3.attn_v.weight"), T.Q4_K, "n_gqa 4");
  assert.equal(q2.get("blk.3.ffn_down.weight"), T.Q3_K);
  assert.equal(q2.get("blk.3.attn_output.weight"), T.Q3_K);
  assert.equal(q2.get("blk.3.ffn_up.weight"), T.Q2_K);
  assert.equal(q2.get("token_embd.weight"), T.Q6_K);
  const m5 = typesOf("Q5_K_M");
  for (let i = 0; i < 16; i++) {
    const more = MORE_BITS_16.includes(i);
    assert.equal(m5.get(`blk.${i}.attn_v.weight`), more ? T.Q6_K : T.Q5_K);
    assert.equal(m5.get(`blk.${i}.ffn_down.weight`), more ? T.Q6_K : T.Q5_K);
  }
  const q6 = typesOf("Q6_K");
  assert.ok(
    [...q6.entries()].every(([n, t]) =>
      n.endsWith("norm.weight") || n.startsWith("rope") ? t === F32 : t === T.Q6_K
    ),
  );
  const q8 = typesOf("Q8_0");
  assert.equal(q8.get("token_embd.weight"), T.Q8_0, "Q8_0 output stays Q8_0");
  const nl = typesOf("IQ4_NL");
  assert.equal(nl.get("blk.0.attn_v.weight"), T.Q5_K, "IQ4_NL attn_v with n_gqa >= 4");
  assert.equal(nl.get("blk.0.ffn_down.weight"), T.Q5_K, "first eighth of ffn_down");
  assert.equal(nl.get("blk.2.ffn_down.weight"), T.IQ4_NL);
  assert.equal(nl.get("token_embd.weight"), T.Q6_K);
});

Deno.test("policy: with an output tensor the embeddings keep the base type", () => {
  const types = typesOf("Q4_K_M", llama1b(16, true));
  assert.equal(types.get("output.weight"), T.Q6_K);
  assert.equal(types.get("token_embd.weight"), T.Q4_K);
  const left = typesOf("Q4_K_M", llama1b(16, true), LLAMA_1B, { quantizeOutputTensor: false });
  assert.equal(left.get("output.weight"), F32, "--leave-output-tensor");
  const typed = typesOf("Q4_K_M", llama1b(16, true), LLAMA_1B, {
    outputTensorType: T.Q8_0,
    tokenEmbeddingType: T.Q5_0,
  });
  assert.equal(typed.get("output.weight"), T.Q8_0);
  assert.equal(typed.get("token_embd.weight"), T.Q5_0);
  // Tied: --output-tensor-type applies to the embeddings too.
  const tied = typesOf("Q4_K_M", llama1b(), LLAMA_1B, { outputTensorType: T.Q8_0 });
  assert.equal(tied.get("token_embd.weight"), T.Q8_0);
});

Deno.test("policy: --pure uses the default type everywhere, fallbacks still apply", () => {
  const tensors: PolicyTensor[] = [
    { name: "token_embd.weight", dims: [576, 100], type: F32 },
    { name: "blk.0.attn_v.weight", dims: [576, 192], type: F32 },
    { name: "blk.0.ffn_down.weight", dims: [1536, 576], type: F32 },
    { name: "blk.0.ffn_norm.weight", dims: [576], type: F32 },
  ];
  const model = { arch: "llama", layerCount: 1, headCount: 9, headCountKv: 3 };
  const plan = planTensorTypes(tensors, model, {
    ftype: parseQuantType("Q4_K")!.ftype,
    pure: true,
  });
  assert.deepEqual(plan.types, [T.Q5_0, T.Q5_0, T.Q4_K, F32]);
  assert.equal(plan.fallbackCount, 2);
  assert.match(plan.warnings[0], / {4}576 not divisible by 256 .*-> falling back to {4}q5_0$/);
});

Deno.test("policy: fallbacks for rows that are not a multiple of 256 (and of 32)", () => {
  const model = { arch: "llama", layerCount: 1, headCount: 4, headCountKv: 4 };
  const cases: Array<[string, number]> = [
    ["Q2_K", T.Q4_0],
    ["Q3_K_S", T.Q4_0],
    ["Q4_K_S", T.Q5_0],
    ["Q5_K_S", T.Q5_1],
    ["Q6_K", T.Q8_0],
    ["IQ4_XS", T.IQ4_NL],
  ];
  for (const [mix, want] of cases) {
    const t = [{ name: "blk.0.ffn_up.weight", dims: [96, 8], type: F32 }];
    const plan = planTensorTypes(t, model, { ftype: parseQuantType(mix)!.ftype });
    assert.deepEqual(plan.types, [want], mix);
    const odd = [{ name: "blk.0.ffn_up.weight", dims: [48, 8], type: F32 }];
    const plan48 = planTensorTypes(odd, model, { ftype: parseQuantType(mix)!.ftype });
    assert.deepEqual(plan48.types, [T.F16], `${mix}: 48 columns fit no 32-block type`);
    assert.match(plan48.warnings[0], /must use F16/);
  }
  // A 32-block type on a 48-column row: F16 as well.
  const plan = planTensorTypes([{ name: "blk.0.ffn_up.weight", dims: [48, 8], type: F32 }], model, {
    ftype: parseQuantType("Q8_0")!.ftype,
  });
  assert.deepEqual(plan.types, [T.F16]);
});

Deno.test("policy: 1D tensors, norms and llama.cpp's exceptions are never quantized", () => {
  const model = { arch: "llama", layerCount: 1, headCount: 4 };
  const names = [
    "blk.0.attn_norm.weight",
    "blk.0.ffn_gate_inp.weight",
    "position_embd.weight",
    "token_types.weight",
    "blk.0.ssm_conv1d.weight",
    "blk.0.attn_q.bias",
    "v.patch_embd.weight",
  ];
  const tensors = names.map((name) => ({ name, dims: [256, 4], type: F32 }));
  tensors.push({ name: "blk.0.ffn_up.weight", dims: [256, 1, 1], type: T.F16 }); // 1D in ggml terms
  const plan = planTensorTypes(tensors, model, { ftype: parseQuantType("Q8_0")!.ftype });
  assert.deepEqual(plan.types, [...names.map(() => F32), T.F16]);
  assert.ok(plan.quantizable.every((q) => !q));
});

Deno.test("policy: the 70B rule and 8-expert models", () => {
  const tensors = [{ name: "blk.0.attn_v.weight", dims: [8192, 1024], type: F32 }];
  const big = { arch: "llama", layerCount: 80, headCount: 64, headCountKv: 8 };
  const plan = planTensorTypes(tensors, big, { ftype: parseQuantType("Q3_K_S")!.ftype });
  assert.deepEqual(plan.types, [T.Q5_K], "70B: attn_v Q3_K -> Q5_K");
  const moe = { ...big, layerCount: 32, expertCount: 8 };
  const moePlan = planTensorTypes(tensors, moe, { ftype: parseQuantType("Q4_K_M")!.ftype });
  assert.deepEqual(moePlan.types, [T.Q8_0]);
});

Deno.test("policy: type names and numbers as llama-quantize parses them", () => {
  assert.equal(parseQuantType("q4_k_m")?.name, "Q4_K_M");
  assert.equal(parseQuantType("Q4_K")?.ftype, 15);
  assert.equal(parseQuantType("15")?.name, "Q4_K", "the first name with ftype 15");
  assert.equal(parseQuantType("0")?.name, "F32");
  assert.equal(parseQuantType("7")?.name, "Q8_0");
  assert.equal(parseQuantType("Q9_9"), undefined);
  assert.equal(parseQuantType("99"), undefined);
  assert.equal(parseQuantType("IQ2_XXS")?.supported, false);
  assert.deepEqual(
    QUANT_TYPES.filter((q) => q.supported).map((q) => q.name).join(" "),
    "Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q3_K_S Q3_K_M Q3_K_L IQ4_NL IQ4_XS Q4_K Q4_K_S Q4_K_M " +
      "Q5_K Q5_K_S Q5_K_M Q6_K Q8_0 F16 BF16 F32",
  );
  assert.equal(parseGgmlTypeName("q6_k")?.id, T.Q6_K);
  assert.equal(parseGgmlTypeName("bf16")?.id, T.BF16);
  assert.equal(parseGgmlTypeName("nope"), undefined);
});

Deno.test("policy: tensors are ordered by block number, then by name bytes", () => {
  const names = ["blk.10.a", "token_embd.weight", "blk.2.b", "blk.2.a", "output.weight", "blk.x"];
  assert.deepEqual(names.sort(compareTensorNames), [
    "blk.x",
    "output.weight",
    "token_embd.weight",
    "blk.2.a",
    "blk.2.b",
    "blk.10.a",
  ]);
});

/** `tests/golden/quantize_policy.json`: llama-quantize --dry-run's per-tensor types. */
interface PolicyGolden {
  legend: Record<string, string>;
  shapes: Record<string, {
    layers: number;
    embd: number;
    ff: number;
    heads: number;
    kv_heads: number;
    vocab: number;
    output: boolean;
    tensor_names: string[];
  }>;
  cases: Array<{ shape: string; options: string[]; type: string; types: string }>;
}

Deno.test("policy: per-tensor types equal llama-quantize --dry-run on synthetic Llama files", () => {
  const golden: PolicyGolden = JSON.parse(
    Deno.readTextFileSync(new URL("./golden/quantize_policy.json", import.meta.url)),
  );
  for (const c of golden.cases) {
    const s = golden.shapes[c.shape];
    const kv = (s.embd / s.heads) * s.kv_heads;
    const tensors: PolicyTensor[] = [
      { name: "token_embd.weight", dims: [s.embd, s.vocab], type: F32 },
      { name: "output_norm.weight", dims: [s.embd], type: F32 },
    ];
    if (s.output) tensors.push({ name: "output.weight", dims: [s.embd, s.vocab], type: F32 });
    for (let i = 0; i < s.layers; i++) {
      const d = (name: string, dims: number[]) =>
        tensors.push({ name: `blk.${i}.${name}`, dims, type: F32 });
      d("attn_norm.weight", [s.embd]);
      d("attn_q.weight", [s.embd, s.embd]);
      d("attn_k.weight", [s.embd, kv]);
      d("attn_v.weight", [s.embd, kv]);
      d("attn_output.weight", [s.embd, s.embd]);
      d("ffn_norm.weight", [s.embd]);
      d("ffn_gate.weight", [s.embd, s.ff]);
      d("ffn_up.weight", [s.embd, s.ff]);
      d("ffn_down.weight", [s.ff, s.embd]);
    }
    tensors.sort((a, b) => compareTensorNames(a.name, b.name));
    assert.deepEqual(tensors.map((t) => t.name), s.tensor_names, `${c.shape}: tensor order`);
    const opt = (flag: string) => {
      const i = c.options.indexOf(flag);
      return i < 0 ? undefined : parseGgmlTypeName(c.options[i + 1])!.id;
    };
    const plan = planTensorTypes(
      tensors,
      { arch: "llama", layerCount: s.layers, headCount: s.heads, headCountKv: s.kv_heads },
      {
        ftype: parseQuantType(c.type)!.ftype,
        pure: c.options.includes("--pure"),
        quantizeOutputTensor: !c.options.includes("--leave-output-tensor"),
        outputTensorType: opt("--output-tensor-type"),
        tokenEmbeddingType: opt("--token-embedding-type"),
      },
    );
    const got = plan.types.map((id) => GGML_TYPES.find((t) => t.id === id)!.name);
    const want = [...c.types].map((l) => golden.legend[l]);
    assert.deepEqual(got, want, `${c.shape} ${c.options.join(" ")} ${c.type}`);
  }
});

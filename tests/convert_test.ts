/**
 * `dotllm convert`: the real all-MiniLM-L6-v2 folder to F32, F16, BF16 and
 * Q8_0 GGUF, byte for byte what llama.cpp's `convert_hf_to_gguf.py` writes
 * (sha256 goldens with the command in `golden/convert.json`); safetensors
 * headers that lie about sizes or offsets (a fuzz of a small valid folder)
 * give one line and leave nothing at OUT.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConvertError, convertHf } from "../src/convert/mod.ts";
import { parseGguf } from "../src/gguf/reader.ts";
import { runDeno } from "./_cli.ts";
import { prng } from "./_fuzz.ts";
import { ensureMiniLm, sha256File } from "./_minilm.ts";
import { ensureHfModel } from "./_hf_llama.ts";
import { Llm } from "../mod.ts";

const golden = JSON.parse(
  readFileSync(new URL("./golden/convert.json", import.meta.url), "utf8"),
) as {
  minilm: Record<string, { sha256: string; bytes: number }>;
  hf_llama_tiny: HfGolden;
  hf_qwen2_tiny: HfGolden;
  hf_qwen3_tiny: HfGolden;
};

type HfGolden = Record<"f32" | "f16" | "bf16" | "q8_0", { sha256: string }> & {
  safetensors_sha256: string;
  greedy: { cases: { prompt: string; tokens: number[] }[] };
};

const work = mkdtempSync(join(tmpdir(), "dotllm-convert-"));
const dir = ensureMiniLm();

for (const type of ["f32", "f16", "bf16", "q8_0"] as const) {
  Deno.test(`convert all-MiniLM-L6-v2 to ${type}: byte-identical to convert_hf_to_gguf.py`, () => {
    const out = join(work, `minilm-${type}.gguf`);
    convertHf(dir, { out, outType: type });
    assert.equal(sha256File(out), golden.minilm[type].sha256);
    rmSync(out);
  });
}

for (
  const [shape, key] of [["tiny", "hf_llama_tiny"], ["qwen2-tiny", "hf_qwen2_tiny"], [
    "qwen3-tiny",
    "hf_qwen3_tiny",
  ]] as const
) {
  Deno.test(`convert a synthetic ${shape} Hugging Face folder: byte-identical to convert_hf_to_gguf.py; llama.cpp's greedy tokens`, async () => {
    const folder = ensureHfModel(shape);
    const g = golden[key];
    assert.equal(sha256File(join(folder, "model.safetensors")), g.safetensors_sha256);
    for (const type of ["f16", "bf16", "q8_0", "f32"] as const) {
      const out = join(work, `${shape}-${type}.gguf`);
      convertHf(folder, { out, outType: type });
      assert.equal(sha256File(out), g[type].sha256, type);
      if (type !== "f32") rmSync(out);
    }
    using llm = await Llm.load(join(work, `${shape}-f32.gguf`), { threads: 1 });
    for (const c of g.greedy.cases) {
      const r = await llm.complete(c.prompt, { temperature: 0, maxTokens: c.tokens.length });
      assert.deepEqual(Array.from(r.tokens), c.tokens, c.prompt);
    }
  });
}

Deno.test("convert CLI: prints the path; missing folder, unknown architecture: one line, exit 1", async () => {
  const out = join(work, "cli.gguf");
  const ok = await runDeno(["convert", dir, out, "--outtype", "f16"]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(ok.stdout, out + "\n");
  assert.equal(sha256File(out), golden.minilm.f16.sha256);
  const missing = await runDeno(["convert", join(work, "nope"), join(work, "x.gguf")]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^dotllm: .*nope: not a folder\n$/);
  const other = join(work, "gpt2");
  Deno.mkdirSync(other);
  writeFileSync(join(other, "config.json"), JSON.stringify({ architectures: ["GPT2LMHeadModel"] }));
  const unknown = await runDeno(["convert", other, join(work, "x.gguf")]);
  assert.equal(unknown.code, 1);
  assert.match(
    unknown.stderr,
    /^dotllm: architecture "GPT2LMHeadModel" is not supported \(supported: BertModel/,
  );
  assert.equal(unknown.stderr.split("\n").length, 2);
  assert.ok(!existsSync(join(work, "x.gguf")));
});

// ---------------------------------------------------------------------------
// Lying safetensors headers

/** A small BERT folder (MiniLM's tokenizer, one layer of width 8) as header JSON + data. */
function tinyBert(): { header: Record<string, unknown>; data: Uint8Array; config: object } {
  const E = 8, V = 30522, F = 16, P = 16;
  const shapes: [string, number[]][] = [
    ["embeddings.word_embeddings.weight", [V, E]],
    ["embeddings.position_embeddings.weight", [P, E]],
    ["embeddings.token_type_embeddings.weight", [2, E]],
    ["embeddings.LayerNorm.weight", [E]],
    ["embeddings.LayerNorm.bias", [E]],
    ...["query", "key", "value"].flatMap((n): [string, number[]][] => [
      [`encoder.layer.0.attention.self.${n}.weight`, [E, E]],
      [`encoder.layer.0.attention.self.${n}.bias`, [E]],
    ]),
    ["encoder.layer.0.attention.output.dense.weight", [E, E]],
    ["encoder.layer.0.attention.output.dense.bias", [E]],
    ["encoder.layer.0.attention.output.LayerNorm.weight", [E]],
    ["encoder.layer.0.attention.output.LayerNorm.bias", [E]],
    ["encoder.layer.0.intermediate.dense.weight", [F, E]],
    ["encoder.layer.0.intermediate.dense.bias", [F]],
    ["encoder.layer.0.output.dense.weight", [E, F]],
    ["encoder.layer.0.output.dense.bias", [E]],
    ["encoder.layer.0.output.LayerNorm.weight", [E]],
    ["encoder.layer.0.output.LayerNorm.bias", [E]],
  ];
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const [name, shape] of shapes) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: "F32", shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const data = new Uint8Array(offset);
  const f = new Float32Array(data.buffer);
  for (let i = 0; i < f.length; i++) f[i] = Math.sin(i) * 0.1;
  const config = {
    architectures: ["BertModel"],
    hidden_size: E,
    intermediate_size: F,
    num_attention_heads: 2,
    num_hidden_layers: 1,
    max_position_embeddings: P,
    layer_norm_eps: 1e-12,
    vocab_size: V,
    type_vocab_size: 2,
    _name_or_path: "tiny/bert",
  };
  return { header, data, config };
}

function safetensors(headerText: string, data: Uint8Array, lengthField?: bigint): Uint8Array {
  const h = new TextEncoder().encode(headerText);
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, lengthField ?? BigInt(h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}

/** Runs the conversion of `folder`: undefined on success, else the error (checked: one line, no OUT). */
function tryConvert(folder: string, out: string): ConvertError | undefined {
  try {
    convertHf(folder, { out, outType: "f16" });
    parseGguf(readFileSync(out));
    rmSync(out);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof ConvertError, `not a ConvertError: ${(error as Error)?.stack}`);
    assert.ok(!error.message.includes("\n"), error.message);
    assert.ok(!existsSync(out), "something was written at OUT");
    return error;
  } finally {
    const left = readdirSync(folder).filter((f) => f.includes(".tmp-"));
    assert.deepEqual(left, [], "a temporary file was left");
  }
}

Deno.test("convert: safetensors headers that lie about sizes or offsets → one line, nothing written", async (t) => {
  const folder = join(work, "tiny-bert");
  Deno.mkdirSync(folder);
  const { header, data, config } = tinyBert();
  writeFileSync(join(folder, "config.json"), JSON.stringify(config));
  for (const f of ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]) {
    copyFileSync(join(dir, f), join(folder, f));
  }
  const file = join(folder, "model.safetensors");
  const out = join(work, "tiny.gguf");
  const write = (bytes: Uint8Array) => writeFileSync(file, bytes);
  const expect = (bytes: Uint8Array, pattern: RegExp) => {
    write(bytes);
    const error = tryConvert(folder, out);
    assert.ok(error !== undefined, `converted: ${pattern}`);
    assert.match(error.message, pattern);
  };
  const text = (h: Record<string, unknown>) => JSON.stringify(h);
  const edit = (name: string, field: Record<string, unknown>) => {
    const h = structuredClone(header);
    Object.assign(h[name] as object, field);
    return text(h);
  };
  const name = "encoder.layer.0.output.dense.weight";
  const entry = header[name] as { data_offsets: number[] };

  await t.step("the valid folder converts", () => {
    write(safetensors(text(header), data));
    assert.equal(tryConvert(folder, out), undefined);
  });
  await t.step("named lies", () => {
    expect(safetensors(text(header), data, 1n << 40n), /header length \d+ does not fit/);
    expect(safetensors(text(header), data, 3n), /header is not JSON/);
    expect(safetensors("[1, 2]", data), /header is not a JSON object/);
    expect(
      safetensors(edit(name, { data_offsets: [entry.data_offsets[0], data.length + 64] }), data),
      /data_offsets \[\d+, \d+\] are outside its \d+ data bytes/,
    );
    expect(
      safetensors(edit(name, { shape: [8, 17] }), data),
      /of shape \[8, 17\] F32 needs 544 bytes, its data_offsets span 512/,
    );
    expect(
      safetensors(
        edit(name, { data_offsets: [0, entry.data_offsets[1] - entry.data_offsets[0]] }),
        data,
      ),
      /overlap/,
    );
    expect(safetensors(edit(name, { dtype: "F8_E9" }), data), /unsupported dtype "F8_E9"/);
    expect(safetensors(edit(name, { shape: [-1, 64] }), data), /bad shape/);
    expect(safetensors(edit(name, { data_offsets: [10, 2] }), data), /outside/);
    expect(safetensors(text(header), data).subarray(0, 5), /too short/);
    expect(
      safetensors(text(header), data).subarray(0, 8 + text(header).length + 100),
      /outside|fit/,
    );
  });
  await t.step("fuzz: 300 mutated headers, each converts or fails with one line", () => {
    const random = prng(40);
    const valid = new TextEncoder().encode(text(header));
    let failures = 0;
    for (let i = 0; i < 300; i++) {
      const h = valid.slice();
      const flips = 1 + Math.floor(random() * 4);
      for (let j = 0; j < flips; j++) {
        const at = Math.floor(random() * h.length);
        // Digits to digits mostly (offsets and shapes that still parse), else any byte.
        h[at] = random() < 0.7 && h[at] >= 48 && h[at] <= 57
          ? 48 + Math.floor(random() * 10)
          : Math.floor(random() * 256);
      }
      const bytes = new Uint8Array(8 + h.length + data.length);
      new DataView(bytes.buffer).setBigUint64(0, BigInt(h.length), true);
      bytes.set(h, 8);
      bytes.set(data, 8 + h.length);
      write(bytes);
      if (tryConvert(folder, out) !== undefined) failures++;
    }
    assert.ok(failures > 100, `only ${failures} of 300 mutations were refused`);
  });
});

Deno.test("convert: a sharded folder (model.safetensors.index.json) converts as one file does", () => {
  const folder = join(work, "sharded");
  Deno.mkdirSync(folder);
  const { header, data, config } = tinyBert();
  writeFileSync(join(folder, "config.json"), JSON.stringify(config));
  for (const f of ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]) {
    copyFileSync(join(dir, f), join(folder, f));
  }
  const names = Object.keys(header).filter((n) => n !== "__metadata__");
  const parts = [names.slice(0, 7), names.slice(7)];
  const weightMap: Record<string, string> = {};
  parts.forEach((part, p) => {
    const file = `model-0000${p + 1}-of-00002.safetensors`;
    const h: Record<string, unknown> = {};
    const chunks: Uint8Array[] = [];
    let offset = 0;
    for (const n of part) {
      const e = header[n] as { dtype: string; shape: number[]; data_offsets: number[] };
      const bytes = data.subarray(e.data_offsets[0], e.data_offsets[1]);
      h[n] = { ...e, data_offsets: [offset, offset + bytes.length] };
      chunks.push(bytes);
      offset += bytes.length;
      weightMap[n] = file;
    }
    const all = new Uint8Array(offset);
    let at = 0;
    for (const c of chunks) all.set(c, (at += c.length) - c.length);
    writeFileSync(join(folder, file), safetensors(JSON.stringify(h), all));
  });
  writeFileSync(
    join(folder, "model.safetensors.index.json"),
    JSON.stringify({ weight_map: weightMap }),
  );
  const single = join(work, "tiny-bert-single");
  Deno.mkdirSync(single);
  for (
    const f of readdirSync(folder).filter((f) => f.endsWith(".json") && !f.startsWith("model"))
  ) {
    copyFileSync(join(folder, f), join(single, f));
  }
  writeFileSync(join(single, "model.safetensors"), safetensors(JSON.stringify(header), data));
  const a = convertHf(folder, { out: join(work, "a.gguf"), outType: "f32" });
  const b = convertHf(single, { out: join(work, "b.gguf"), outType: "f32" });
  const ba = readFileSync(a.path), bb = readFileSync(b.path);
  const ga = parseGguf(ba), gb = parseGguf(bb);
  // Shards in name order, each shard's tensors by name (the reference's order): the same
  // tensors and bytes, the first shard's first.
  assert.deepEqual(
    ga.tensors.slice(0, 7).map((t) => t.name).sort(),
    [
      ...new Set(parts[0].map((n) => gb.tensors.find((t) => t.name === mapName(n))!.name)),
    ].sort(),
  );
  for (const t of gb.tensors) {
    const u = ga.tensors.find((x) => x.name === t.name)!;
    assert.deepEqual(u.dims, t.dims);
    assert.deepEqual(
      ba.subarray(u.dataOffset, u.dataOffset + u.sizeBytes),
      bb.subarray(t.dataOffset, t.dataOffset + t.sizeBytes),
    );
  }
  // A shard named in the index but missing: one line.
  rmSync(join(folder, "model-00002-of-00002.safetensors"));
  assert.throws(() => convertHf(folder, { out: join(work, "c.gguf") }), /missing shard/);
  assert.ok(!existsSync(join(work, "c.gguf")));
});

/** The GGUF name of a tiny-BERT tensor. */
function mapName(n: string): string {
  return n.replace("embeddings.word_embeddings", "token_embd")
    .replace("embeddings.position_embeddings", "position_embd")
    .replace("embeddings.token_type_embeddings", "token_types")
    .replace("embeddings.LayerNorm", "token_embd_norm")
    .replace(/encoder\.layer\.0\.attention\.self\.query/, "blk.0.attn_q")
    .replace(/encoder\.layer\.0\.attention\.self\.key/, "blk.0.attn_k")
    .replace(/encoder\.layer\.0\.attention\.self\.value/, "blk.0.attn_v")
    .replace(/encoder\.layer\.0\.attention\.output\.dense/, "blk.0.attn_output")
    .replace(/encoder\.layer\.0\.attention\.output\.LayerNorm/, "blk.0.attn_output_norm")
    .replace(/encoder\.layer\.0\.intermediate\.dense/, "blk.0.ffn_up")
    .replace(/encoder\.layer\.0\.output\.dense/, "blk.0.ffn_down")
    .replace(/encoder\.layer\.0\.output\.LayerNorm/, "blk.0.layer_output_norm");
}

globalThis.addEventListener("unload", () => rmSync(work, { recursive: true, force: true }));

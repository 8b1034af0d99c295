/**
 * `dotllm convert` of folders whose tokenizer is a SentencePiece
 * `tokenizer.model` (sentencepiece's real BPE test model): synthetic Gemma 3,
 * Phi-3 and Llama folders to F32, F16, BF16 and Q8_0, byte for byte what
 * llama.cpp's `convert_hf_to_gguf.py` writes (sha256 goldens with the command
 * in `golden/convert.json`); the F32 files load in dotllm and generate
 * llama.cpp's greedy tokens; what the vocabulary holds (added tokens, padding,
 * types, the Gemma norm shift and embedding cut); broken folders are one line
 * with nothing written.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConvertError, convertHf } from "../src/convert/mod.ts";
import { GgufArray, type GgufValue, parseGguf } from "../src/gguf/reader.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { Llm } from "../mod.ts";
import { testdata } from "./_testdata.ts";
import { readVectors } from "./_vocabs.ts";
import { runDeno } from "./_cli.ts";
import { ensureHfSpm, HF_SPM_SHAPES, type HfSpmShape } from "./_hf_spm.ts";
import { sha256File } from "./_pypi.ts";

type Golden = Record<"f32" | "f16" | "bf16" | "q8_0", { sha256: string; bytes: number }> & {
  safetensors_sha256: string;
  tokenizer_model_sha256?: string;
  greedy: { cases: { prompt: string; tokens: number[] }[] };
};
const golden = JSON.parse(
  readFileSync(new URL("./golden/convert.json", import.meta.url), "utf8"),
) as Record<string, Golden>;
const key = (shape: HfSpmShape) => `hf_${shape.replaceAll("-", "_")}`;

const work = mkdtempSync(join(tmpdir(), "dotllm-convert-spm-"));

for (const shape of HF_SPM_SHAPES) {
  Deno.test(`convert ${shape} (tokenizer.model): byte-identical to convert_hf_to_gguf.py; llama.cpp's greedy tokens`, async () => {
    const folder = ensureHfSpm(shape);
    const g = golden[key(shape)];
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

/** The elements of an array key. */
function array<T>(value: GgufValue | undefined): T[] {
  assert.ok(value instanceof GgufArray);
  return Array.from(value.values as ArrayLike<T>);
}

/** The converted F32 file of `shape` (made by the test above, or now). */
function converted(shape: HfSpmShape): ReturnType<typeof parseGguf> & { bytes: Uint8Array } {
  const out = join(work, `${shape}-f32.gguf`);
  if (!existsSync(out)) convertHf(ensureHfSpm(shape), { out, outType: "f32" });
  const bytes = readFileSync(out);
  return { ...parseGguf(bytes), bytes };
}

Deno.test("convert tokenizer.model: the vocabulary as the reference writes it (added tokens, padding, types)", () => {
  const gemma = converted("gemma3-spm-tiny");
  const m = gemma.metadata;
  const tokens = array<string>(m.get("tokenizer.ggml.tokens"));
  const types = array<number>(m.get("tokenizer.ggml.token_type"));
  const scores = array<number>(m.get("tokenizer.ggml.scores"));
  assert.equal(m.get("tokenizer.ggml.model"), "llama");
  assert.equal(tokens.length, 1024); // config.json's vocab_size, past the model's 1000 pieces
  // <unk> is special in added_tokens_decoder: control, no longer the model's UNKNOWN.
  assert.deepEqual([tokens[0], types[0], tokens[1], types[1]], ["<unk>", 3, "<s>", 3]);
  assert.deepEqual([tokens[3], types[3], scores[4]], ["\u2581t", 1, -1]);
  assert.deepEqual([tokens[1000], types[1000], scores[1000]], ["<start_of_turn>", 3, -1000]);
  assert.deepEqual([tokens[1002], types[1002]], ["<unused0>", 3]); // looks special: control
  assert.deepEqual([tokens[1003], types[1003]], ["  two", 4]); // user-defined, ▁ as spaces
  assert.deepEqual([tokens[1004], types[1004], scores[1004]], ["[PAD1004]", 5, -10000]);
  assert.equal(m.get("tokenizer.ggml.add_space_prefix"), false);
  assert.equal(m.get("tokenizer.ggml.add_bos_token"), true);
  assert.match(m.get("tokenizer.chat_template") as string, /<start_of_turn>/);
  // The embedding's 1040 rows cut to the vocabulary; norms stored as 1 + w.
  assert.deepEqual(gemma.tensorsByName.get("token_embd.weight")!.dims, [64, 1024]);
  const st = readFileSync(join(ensureHfSpm("gemma3-spm-tiny"), "model.safetensors"));
  const headerLength = Number(new DataView(st.buffer, st.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(st.subarray(8, 8 + headerLength)));
  const [start] = header["model.norm.weight"].data_offsets;
  const w = new Float32Array(st.buffer.slice(st.byteOffset + 8 + headerLength + start)).subarray(
    0,
    64,
  );
  const t = gemma.tensorsByName.get("output_norm.weight")!;
  const stored = new Float32Array(gemma.bytes.buffer.slice(t.dataOffset, t.dataOffset + 256));
  assert.deepEqual(stored, w.map((x) => Math.fround(x + 1)));

  // Phi-3: its own rules (added tokens marked user-defined unless special, tokenizer.json's too).
  const phi = converted("phi3-spm-tiny").metadata;
  const pt = array<string>(phi.get("tokenizer.ggml.tokens"));
  const pty = array<number>(phi.get("tokenizer.ggml.token_type"));
  assert.deepEqual([pt[2], pty[2]], ["</s>", 4]); // special: false in added_tokens_decoder
  assert.deepEqual([pt[1004], pty[1004]], ["<|placeholder1|>", 4]); // no look-special rule
  assert.deepEqual([pt[1005], pty[1005]], ["<|system|>", 3]); // from tokenizer.json
  assert.equal(phi.get("tokenizer.ggml.eos_token_id"), 1000);
  assert.equal(phi.has("tokenizer.ggml.add_space_prefix"), false);
  // LongRoPE: the factors as the first tensors, the attention factor after the architecture.
  const lr = converted("phi3-longrope-spm-tiny");
  assert.deepEqual(lr.tensors.slice(0, 2).map((t) => [t.name, t.dims]), [
    ["rope_factors_long.weight", [8]],
    ["rope_factors_short.weight", [8]],
  ]);
  assert.equal([...lr.metadata.keys()][1], "phi3.rope.scaling.attn_factor");
  const attn = Math.sqrt(1 + Math.log(131072 / 4096) / Math.log(4096));
  assert.equal(lr.metadata.get("phi3.rope.scaling.attn_factor"), Math.fround(attn));
  // Llama: exactly the model's pieces, no added tokens.
  const llama = converted("llama-spm-tiny").metadata;
  assert.equal(array<string>(llama.get("tokenizer.ggml.tokens")).length, 1000);
  assert.deepEqual(array<number>(llama.get("tokenizer.ggml.token_type")).slice(0, 4), [2, 3, 3, 1]);
  // Llama 2's vocabulary through a tokenizer.model comes back as llama.cpp wrote it from the
  // original: the same 32000 pieces, scores (-1e9 whitespace runs) and types (256 bytes).
  assert.equal(
    sha256File(join(ensureHfSpm("llama2-vocab-spm-tiny"), "tokenizer.model")),
    golden[key("llama2-vocab-spm-tiny")].tokenizer_model_sha256,
  );
  const l2 = converted("llama2-vocab-spm-tiny").metadata;
  const original = parseGguf(readFileSync(testdata("models", "llama-2-tiny-random.gguf"))).metadata;
  for (const k of ["tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"]) {
    assert.deepEqual(array(l2.get(k)), array(original.get(k)), k);
  }
  assert.equal(
    array<number>(l2.get("tokenizer.ggml.token_type")).filter((t) => t === 6).length,
    256,
  );
  assert.equal(llama.get("tokenizer.ggml.pre"), "default");
  // CodeLlama's rule: a vocabulary of 32016 gets an EOT id (its ▁<EOT>); the other infill
  // types have no GGUF key in gguf-py.
  const code = converted("codellama-vocab-spm-tiny").metadata;
  assert.equal(code.get("tokenizer.ggml.eot_token_id"), 32010);
  assert.equal(array<string>(code.get("tokenizer.ggml.tokens"))[32010], "\u2581<EOT>");
});

Deno.test("convert tokenizer.model: the converted vocabularies tokenize as llama.cpp tokenizes them", () => {
  const tokens = JSON.parse(
    readFileSync(new URL("./golden/convert_spm_tokens.json", import.meta.url), "utf8"),
  ) as Record<
    string,
    { plain: (number[] | null)[]; special: { text: string; tokens: number[] }[] }
  >;
  const texts = readFileSync(testdata("models", "stories260K.gguf.inp"), "utf8")
    .split("\n__ggml_vocab_test__\n").slice(0, -1);
  for (
    const [name, shape] of [["gemma3", "gemma3-spm-tiny"], ["phi3", "phi3-spm-tiny"], [
      "llama",
      "llama-spm-tiny",
    ]] as const
  ) {
    const tokenizer = Tokenizer.fromGguf(converted(shape));
    const want = tokens[name];
    assert.equal(want.plain.length, texts.length);
    let compared = 0;
    texts.forEach((text, i) => {
      const got = Array.from(tokenizer.encode(text, { addSpecial: false, parseSpecial: false }));
      const expected = want.plain[i];
      // llama.cpp fails on a character with no piece (no byte fallback here): dotllm writes <unk>.
      if (expected === null) assert.ok(got.includes(0), `${name}: ${JSON.stringify(text)}`);
      else {
        assert.deepEqual(got, expected, `${name}: ${JSON.stringify(text)}`);
        compared++;
      }
    });
    assert.ok(compared >= 20, `${name}: only ${compared} strings compared`);
    for (const s of want.special) {
      assert.deepEqual(
        Array.from(tokenizer.encode(s.text, { addSpecial: false, parseSpecial: true })),
        s.tokens,
        `${name}: ${s.text}`,
      );
    }
  }
});

Deno.test("convert tokenizer.model: Llama 2's vocabulary converted tokenizes llama.cpp's llama-spm vectors", () => {
  const tokenizer = Tokenizer.fromGguf(converted("llama2-vocab-spm-tiny"));
  const vectors = readVectors(testdata("llama.cpp-vocab", "ggml-vocab-llama-spm.gguf"));
  assert.equal(vectors.length, 46);
  for (const { text, ids } of vectors) {
    const got = Array.from(tokenizer.encode(text, { addSpecial: false, parseSpecial: false }));
    assert.deepEqual(got, Array.from(ids), JSON.stringify(text));
  }
});

/** A copy of `shape`'s folder, to break. */
function copyFolder(shape: HfSpmShape, name: string): string {
  const from = ensureHfSpm(shape);
  const to = join(work, name);
  mkdirSync(to);
  for (const f of readdirSync(from)) copyFileSync(join(from, f), join(to, f));
  return to;
}

function refused(folder: string, pattern: RegExp): void {
  const out = join(work, "refused.gguf");
  assert.throws(() => convertHf(folder, { out, outType: "f16" }), (error: Error) => {
    assert.ok(error instanceof ConvertError, error.stack);
    assert.ok(!error.message.includes("\n"), error.message);
    assert.match(error.message, pattern);
    return true;
  });
  assert.ok(!existsSync(out), "something was written at OUT");
  assert.deepEqual(readdirSync(work).filter((f) => f.includes(".tmp-")), []);
}

Deno.test("convert tokenizer.model: broken folders → one line, nothing written", () => {
  const gemma = copyFolder("gemma3-spm-tiny", "gemma-broken");
  const model = readFileSync(join(gemma, "tokenizer.model"));
  writeFileSync(join(gemma, "tokenizer.model"), model.subarray(0, 5000));
  refused(gemma, /^tokenizer\.model: .* at byte \d+$/);
  writeFileSync(join(gemma, "tokenizer.model"), new Uint8Array(0));
  refused(gemma, /^tokenizer\.model: no pieces/);
  rmSync(join(gemma, "tokenizer.model"));
  refused(gemma, /Gemma 3 is converted from its tokenizer\.model, missing here/);

  const phi = copyFolder("phi3-spm-tiny", "phi-broken");
  const tc = JSON.parse(readFileSync(join(phi, "tokenizer_config.json"), "utf8"));
  tc.added_tokens_decoder["5000"] = { content: "<|far|>", special: true };
  writeFileSync(join(phi, "tokenizer_config.json"), JSON.stringify(tc));
  refused(phi, /^tokenizer_config\.json: token id 5000 is past vocab_size 1024$/);
  rmSync(join(phi, "tokenizer.model"));
  refused(phi, /no tokenizer\.model$/);
  const lrope = copyFolder("phi3-longrope-spm-tiny", "longrope-broken");
  const config = JSON.parse(readFileSync(join(lrope, "config.json"), "utf8"));
  config.rope_scaling.short_factor = [1, 2, 3];
  writeFileSync(join(lrope, "config.json"), JSON.stringify(config));
  refused(lrope, /short_factor must have 8 values \(got 8, 3\)$/);
  config.rope_scaling = { type: "yarn", factor: 4 };
  writeFileSync(join(lrope, "config.json"), JSON.stringify(config));
  refused(lrope, /RoPE scaling "yarn" is not supported here$/);

  const llama = copyFolder("llama-spm-tiny", "llama-broken");
  const llamaConfig = JSON.parse(readFileSync(join(llama, "config.json"), "utf8"));
  writeFileSync(join(llama, "config.json"), JSON.stringify({ ...llamaConfig, vocab_size: 1e15 }));
  refused(llama, /^config\.json: vocab_size 1000000000000000 is not 1 to 4194304$/);
  writeFileSync(join(llama, "config.json"), JSON.stringify(llamaConfig));
  writeFileSync(join(llama, "added_tokens.json"), JSON.stringify({ "<x>": -3 }));
  refused(llama, /^added_tokens\.json: token id -3 is not a non-negative integer$/);
  // Without tokenizer.model a Llama folder falls back to tokenizer.json, as the reference does.
  rmSync(join(llama, "tokenizer.model"));
  refused(llama, /no tokenizer\.json$/);
});

Deno.test("convert tokenizer.model: a MistralForCausalLM folder converts as Llama, byte-identical", () => {
  const folder = copyFolder("llama2-vocab-spm-tiny", "mistral-tiny"); // its name is general.name
  const config = JSON.parse(readFileSync(join(folder, "config.json"), "utf8"));
  Object.assign(config, {
    architectures: ["MistralForCausalLM"],
    model_type: "mistral",
    sliding_window: 4096,
    rope_theta: 10000.0,
    max_position_embeddings: 32768,
  });
  writeFileSync(join(folder, "config.json"), JSON.stringify(config));
  const out = join(work, "mistral-tiny-f16.gguf");
  convertHf(folder, { out, outType: "f16" });
  assert.equal(sha256File(out), (golden.mistral_tiny_f16 as unknown as { sha256: string }).sha256);
});

Deno.test("convert CLI: a Gemma 3 folder with tokenizer.model", async () => {
  const folder = ensureHfSpm("gemma3-spm-tiny");
  const out = join(work, "cli-gemma.gguf");
  const r = await runDeno(["convert", folder, out, "--outtype", "bf16"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, out + "\n");
  assert.equal(sha256File(out), golden[key("gemma3-spm-tiny")].bf16.sha256);
});

globalThis.addEventListener("unload", () => rmSync(work, { recursive: true, force: true }));

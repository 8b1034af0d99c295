import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { runBun, runDeno } from "./_cli.ts";
import { testdata } from "./_testdata.ts";
import { openGguf } from "../src/gguf/file.ts";
import { GgufError } from "../src/gguf/reader.ts";
import { formatGgufSummary, type GgufSummary, summarizeGguf } from "../src/gguf/summary.ts";

/** Every .gguf under the test data folders the issue names. */
function allGgufFiles(): string[] {
  const files: string[] = [];
  for (const dir of ["models", "models/legacy", "llama.cpp-vocab", "vocab-converted"]) {
    for (const name of readdirSync(testdata(dir)).sort()) {
      if (name.endsWith(".gguf")) files.push(testdata(dir, name));
    }
  }
  return files;
}

const LEGACY = "tinyllamas-stories-260k-f32.gguf";

/** One row of the "GGUF metadata summary" table in the test data README. */
interface Row {
  file: string;
  version: number;
  architecture: string;
  name: string;
  model: string;
  pre: string | null;
  vocab: number;
  merges: number | null;
  ids: (number | null)[];
  ctx: number | null;
  embd: number | null;
  layers: number | null;
  heads: (number | null)[];
  ff: number | null;
  rope: number | null;
  tensors: number;
  tensorTypes: Record<string, number>;
}

/** Parses the README's "GGUF metadata summary" table (`–` = key absent). */
function readmeTable(): Row[] {
  const readme = readFileSync(testdata("README.md"), "utf8");
  const start = readme.indexOf("## GGUF metadata summary");
  assert.ok(start >= 0, "the README has a GGUF metadata summary section");
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const lines = section.split("\n").filter((l) => l.startsWith("| `"));
  const opt = (s: string) => s === "–" ? null : s;
  const num = (s: string) => s === "–" ? null : Number(s);
  return lines.map((line) => {
    const c = line.split("|").slice(1, -1).map((x) => x.trim());
    assert.equal(c.length, 16, line);
    const [count, types] = c[15].match(/^(\d+) \((.*)\)$/)!.slice(1);
    const tensorTypes: Record<string, number> = {};
    for (const part of types.split(", ")) {
      const m = part.match(/^(\w+)×(\d+)$/);
      if (m) tensorTypes[m[1]] = Number(m[2]);
    }
    return {
      file: c[0].replaceAll("`", ""),
      version: Number(c[1].slice(1)),
      architecture: c[2],
      name: c[3],
      model: c[4],
      pre: opt(c[5]),
      vocab: Number(c[6]),
      merges: num(c[7]),
      ids: c[8].split(" / ").map(num),
      ctx: num(c[9]),
      embd: num(c[10]),
      layers: num(c[11]),
      heads: c[12].split(" / ").map(num),
      ff: num(c[13]),
      rope: num(c[14]),
      tensors: Number(count),
      tensorTypes,
    };
  });
}

function hp(s: GgufSummary, key: string): unknown {
  return s.hyperParameters[`${s.architecture}.${key}`] ?? null;
}

function checkRow(s: GgufSummary, row: Row): void {
  const what = row.file;
  assert.equal(s.version, row.version, what);
  assert.equal(s.architecture, row.architecture, what);
  assert.equal(s.name, row.name, what);
  assert.equal(s.tokenizer.model, row.model, what);
  assert.equal(s.tokenizer.pre, row.pre, what);
  assert.equal(s.tokenizer.tokenCount, row.vocab, what);
  assert.equal(s.tokenizer.mergeCount, row.merges, what);
  const t = s.tokenizer;
  assert.deepEqual([t.bos, t.eos, t.unk, t.pad], row.ids, what);
  assert.equal(hp(s, "context_length"), row.ctx, what);
  assert.equal(hp(s, "embedding_length"), row.embd, what);
  assert.equal(hp(s, "block_count"), row.layers, what);
  assert.deepEqual(
    [hp(s, "attention.head_count"), hp(s, "attention.head_count_kv")],
    row.heads,
    what,
  );
  assert.equal(hp(s, "feed_forward_length"), row.ff, what);
  assert.equal(hp(s, "rope.dimension_count"), row.rope, what);
  assert.equal(s.tensorCount, row.tensors, what);
  assert.deepEqual(s.tensorTypes, row.tensorTypes, what);
}

Deno.test("the README table covers the test data and parses", () => {
  const rows = readmeTable();
  assert.equal(rows.length, 15);
  const names = new Set(allGgufFiles().map((f) => basename(f)));
  for (const row of rows) assert.ok(names.has(row.file), row.file);
});

Deno.test("inspect --json of every test-data GGUF equals the README metadata table", async () => {
  const rows = new Map(readmeTable().map((r) => [r.file, r]));
  const files = allGgufFiles();
  assert.ok(files.length >= 18, `found ${files.length} files`);
  const results = await Promise.all(files.map((f) => runDeno(["inspect", "--json", f])));
  let checked = 0;
  files.forEach((file, i) => {
    const { code, stdout, stderr } = results[i];
    if (basename(file) === LEGACY) {
      assert.equal(code, 1);
      assert.equal(stdout, "");
      assert.equal(stderr, `dotllm: ${file}: unsupported GGUF version 1\n`);
      return;
    }
    assert.equal(code, 0, `${file}: ${stderr}`);
    assert.equal(stderr, "");
    const json = JSON.parse(stdout) as GgufSummary & { file: string };
    assert.equal(json.file, file);
    const row = rows.get(basename(file));
    if (row !== undefined) {
      checkRow(json, row);
      checked++;
    }
  });
  assert.equal(checked, 14); // every row but the v1 file
});

// The vocab-converted files are described in prose in the README's "vocab-converted/" table,
// not in the summary table; these expectations are transcribed from that prose.
const CONVERTED: Record<string, Partial<Row>> = {
  "ggml-vocab-llama-bpe.gguf": {
    architecture: "llama",
    name: "llama-bpe",
    model: "gpt2",
    pre: "llama-bpe",
    vocab: 128256,
    merges: 280147,
    ids: [128000, 128001],
  },
  "ggml-vocab-qwen2.gguf": {
    architecture: "qwen2",
    name: "qwen2",
    model: "gpt2",
    pre: "qwen2",
    vocab: 151936,
    merges: 151387,
    ids: [151643, 151645, null, 151643],
  },
  "ggml-vocab-smollm.gguf": {
    architecture: "llama",
    name: "smollm",
    model: "gpt2",
    pre: "smollm",
    vocab: 49152,
    merges: 48900,
    ids: [1, 2, 0, 2],
  },
};

Deno.test("the vocab-converted files inspect as the README describes them", () => {
  for (const [name, want] of Object.entries(CONVERTED)) {
    using file = openGguf(testdata("vocab-converted", name));
    const s = summarizeGguf(file.gguf);
    assert.equal(s.version, 3, name);
    assert.equal(s.architecture, want.architecture, name);
    assert.equal(s.name, want.name, name);
    assert.equal(s.tokenizer.model, want.model, name);
    assert.equal(s.tokenizer.pre, want.pre, name);
    assert.equal(s.tokenizer.tokenCount, want.vocab, name);
    assert.equal(s.tokenizer.mergeCount, want.merges, name);
    const t = s.tokenizer;
    assert.deepEqual([t.bos, t.eos, t.unk, t.pad].slice(0, want.ids!.length), want.ids, name);
    assert.equal(s.tensorCount, 0, name);
    // Vocab-only: the file ends right after the KV section, before the aligned data start.
    assert.ok(s.dataStart >= s.fileSize, name);
  }
});

Deno.test("inspect of the two real models: tensor table and data section as the README says", () => {
  using stories = openGguf(testdata("models/stories260K.gguf"));
  const s = summarizeGguf(stories.gguf);
  assert.equal(s.dataStart, 14176);
  assert.equal(s.dataStart + s.tensorBytes, s.fileSize);
  const byName = new Map(s.tensors.map((t) => [t.name, t]));
  assert.deepEqual(byName.get("token_embd.weight")!.shape, [64, 512]);
  assert.deepEqual(byName.get("blk.0.attn_k.weight")!.shape, [64, 32]);
  assert.deepEqual(byName.get("blk.4.ffn_down.weight")!.shape, [172, 64]);
  assert.equal(byName.get("token_embd.weight")!.bytes, 64 * 512 * 4);
  assert.equal(s.hyperParameters["llama.attention.layer_norm_rms_epsilon"], 1e-5);
  // The tensor table in text: one row per tensor with its absolute offset.
  const text = formatGgufSummary(s, "stories260K.gguf");
  assert.match(text, /^\s+0\s+token_embd\.weight\s+F32\s+64 x 512\s+131072\s+14176$/m);

  using tiny = openGguf(testdata("models/llama-2-tiny-random.gguf"));
  const r = summarizeGguf(tiny.gguf);
  assert.equal(r.dataStart, 724416);
  assert.equal(r.dataStart + r.tensorBytes, r.fileSize);
  assert.equal(r.fileTypeName, "MOSTLY_F16");
  const embd = r.tensors.find((t) => t.name === "token_embd.weight")!;
  assert.deepEqual([embd.type, embd.shape, embd.bytes], ["F16", [8, 32000], 8 * 32000 * 2]);
  // Long arrays are summarised: the length, and only the first elements.
  const tokens = r.metadata.find((m) => m.key === "tokenizer.ggml.tokens")!;
  assert.deepEqual(tokens.value, {
    elementType: "string",
    length: 32000,
    values: ["<unk>", "<s>", "</s>", "<0x00>", "<0x01>", "<0x02>", "<0x03>", "<0x04>"],
  });
});

Deno.test("openGguf refuses the v1 file and names a missing one", () => {
  const legacy = testdata("models/legacy", LEGACY);
  assert.throws(
    () => openGguf(legacy),
    (e) => e instanceof GgufError && e.message === `${legacy}: unsupported GGUF version 1`,
  );
  assert.throws(
    () => openGguf("/nonexistent/m.gguf"),
    /^GgufError: \/nonexistent\/m\.gguf: cannot open: no such file$/,
  );
});

Deno.test("inspect: usage errors exit 2, a bad file exits 1 with one line naming it", async () => {
  const missing = await runDeno(["inspect"]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /^dotllm: missing MODEL \(see `dotllm inspect --help`\)\n$/);
  const dir = testdata("models");
  const directory = await runDeno(["inspect", dir]);
  assert.equal(directory.code, 1);
  assert.equal(directory.stderr, `dotllm: ${dir}: cannot open: is a directory\n`);
});

Deno.test("bun cli.ts inspect prints exactly what Deno prints (text, --json, errors)", async () => {
  const files = [
    testdata("models/stories260K.gguf"),
    testdata("models/llama-2-tiny-random.gguf"),
    testdata("vocab-converted/ggml-vocab-qwen2.gguf"),
    testdata("llama.cpp-vocab/ggml-vocab-bert-bge.gguf"),
    testdata("models/legacy", LEGACY),
    join(testdata("models"), "missing.gguf"),
  ];
  for (const file of files) {
    for (const args of [["inspect", file], ["inspect", "--json", file]]) {
      const [deno, bun] = await Promise.all([runDeno(args), runBun(args)]);
      assert.deepEqual(bun, deno, args.join(" "));
      assert.ok(deno.stdout.length > 0 || deno.stderr.length > 0);
    }
  }
});

Deno.test("inspect: the line after the architecture says how dotllm runs the file, or why not", async () => {
  const stories = await runDeno(["inspect", testdata("models/stories260K.gguf")]);
  assert.equal(stories.code, 0);
  assert.match(
    stories.stdout,
    /^architecture: {2}llama\nruns as: {7}llama: 8 heads \/ 4 KV × 8, normal rope 10000, SiLU\n/m,
  );
  const vocab = testdata("llama.cpp-vocab/ggml-vocab-baichuan.gguf");
  const vocabOnly = await runDeno(["inspect", vocab]);
  assert.equal(vocabOnly.code, 0);
  assert.match(vocabOnly.stdout, /^runs as: {7}not runnable: unsupported architecture "baichuan"/m);
});

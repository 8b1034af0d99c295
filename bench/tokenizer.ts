/**
 * Tokenizer throughput: MB/s encoding 1 MB of English prose and 1 MB of mixed
 * code/CJK with the llama-bpe (Llama 3) and llama-spm (Llama 2) vocabularies,
 * plus 100 KB of "a" with no spaces (must not be pathological), and decoding.
 * Every run uses a fresh tokenizer over the loaded vocabulary, so the per-word
 * cache starts cold. Prints a table.
 *
 * ```sh
 * ./dotllm task bench:tokenizer
 * deno run -A bench/tokenizer.ts --dump /tmp   # also write the inputs
 * ```
 *
 * @module
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseGguf } from "../src/gguf/reader.ts";
import { loadVocab, Tokenizer, type Vocab } from "../src/tokenizer/mod.ts";

const testdataDir = process.env.DOTLLM_TESTDATA ??
  fileURLToPath(new URL("../../shared/testdata", import.meta.url));
const root = fileURLToPath(new URL("../", import.meta.url));

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MB = 1 << 20;

/** English-like prose: words of the test data's README and stories, Zipf-sampled into sentences. */
function prose(size: number): string {
  const golden = JSON.parse(
    readFileSync(join(testdataDir, "golden/stories260K.greedy.json"), "utf8"),
  );
  const source = readFileSync(join(testdataDir, "README.md"), "utf8") + " " +
    golden.cases.map((c: { generated_text: string }) => c.generated_text).join(" ");
  const counts = new Map<string, number>();
  for (const w of source.match(/[A-Za-z][a-z']*/g) ?? []) counts.set(w, (counts.get(w) ?? 0) + 1);
  const words = [...counts.keys()].sort((a, b) => counts.get(b)! - counts.get(a)!);
  const rand = prng(42);
  const zipf = () =>
    words[Math.min(words.length - 1, Math.floor(Math.exp(rand() * Math.log(words.length))) - 1)];
  let out = "";
  while (out.length < size) {
    const n = 5 + Math.floor(rand() * 15);
    const sentence: string[] = [];
    for (let i = 0; i < n; i++) sentence.push(zipf());
    sentence[0] = sentence[0][0].toUpperCase() + sentence[0].slice(1);
    if (rand() < 0.3) sentence[Math.floor(rand() * n)] += ",";
    if (rand() < 0.1) sentence.push(String(Math.floor(rand() * 2025)));
    out += sentence.join(" ") + (rand() < 0.1 ? "?" : ".") + (rand() < 0.15 ? "\n\n" : " ");
  }
  return out.slice(0, size);
}

/** Mixed code and CJK: this repository's TypeScript interleaved with CJK sentences. */
function codeCjk(size: number): string {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith(".ts")) files.push(readFileSync(join(dir, e.name), "utf8"));
    }
  };
  walk(join(root, "src"));
  const code = files.join("\n");
  const cjk = [
    "今日は天気がいいので、公園を散歩しました。",
    "这个函数把文本切分成词，然后按合并规则生成词元。",
    "토크나이저는 텍스트를 토큰으로 나눕니다. ",
    "機械学習モデルは大量のデータから学習します。",
    "我们在中央处理器上运行大型语言模型，速度很快。",
  ];
  const rand = prng(7);
  let out = "";
  let at = 0;
  while (out.length < size) {
    const take = 200 + Math.floor(rand() * 800);
    out += code.slice(at, at + take) + "\n// " + cjk[Math.floor(rand() * cjk.length)] + "\n";
    at = (at + take) % Math.max(1, code.length - 1000);
  }
  return out.slice(0, size);
}

function loadVocabFile(name: string): Vocab {
  const dirs = ["vocab-converted", "llama.cpp-vocab"];
  for (const d of dirs) {
    try {
      return loadVocab(parseGguf(readFileSync(join(testdataDir, d, `ggml-vocab-${name}.gguf`))));
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
    }
  }
  throw new Error(`no vocab ${name}`);
}

function timeIt(fn: () => void, minMs = 1500): number {
  fn(); // warm-up (JIT; the tokenizer inside fn is fresh each call)
  const times: number[] = [];
  const start = performance.now();
  while (performance.now() - start < minMs || times.length < 3) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

const inputs: Array<[string, string]> = [
  ["1 MB English prose", prose(MB)],
  ["1 MB code + CJK", codeCjk(MB)],
  ["100 KB prose", prose(100 * 1024)],
  ['100 KB "a"', "a".repeat(100 * 1024)],
];

// `--dump DIR` writes the inputs (to time llama-tokenize on the same text)
const dump = process.argv.indexOf("--dump");
if (dump >= 0) {
  const dir = process.argv[dump + 1];
  inputs.forEach(([, text], i) => writeFileSync(join(dir, `input${i}.txt`), text));
  console.log(`wrote ${inputs.map(([l], i) => `input${i}.txt (${l})`).join(", ")} to ${dir}`);
}

const rows: string[][] = [["vocab", "input", "encode ms", "MB/s", "tokens", "decode ms"]];
for (const name of ["llama-bpe", "llama-spm"]) {
  const t0 = performance.now();
  const vocab = loadVocabFile(name);
  const loadMs = performance.now() - t0;
  rows.push([name, `(load ${loadMs.toFixed(0)} ms)`, "", "", "", ""]);
  for (const [label, text] of inputs) {
    const bytes = new TextEncoder().encode(text).length;
    let ids: number[] = [];
    const ms = timeIt(() => {
      ids = new Tokenizer(vocab).encode(text, { addSpecial: false });
    });
    const tok = new Tokenizer(vocab);
    const decodeMs = timeIt(() => void tok.decode(ids), 500);
    rows.push([
      "",
      label,
      ms.toFixed(1),
      (bytes / MB / (ms / 1000)).toFixed(2),
      String(ids.length),
      decodeMs.toFixed(1),
    ]);
  }
}

const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
for (const r of rows) console.log(r.map((cell, c) => cell.padEnd(widths[c])).join("  "));

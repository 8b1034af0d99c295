import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseGguf } from "../src/gguf/reader.ts";
import { GGML_TYPES, type GgmlTypeInfo } from "../src/gguf/types.ts";
import { computableTypes } from "../src/kernels/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { patchedStories } from "./_golden.ts";
import { runCli } from "./_run_cli.ts";
import { ensureGemma } from "./_gemma.ts";
import { testdata } from "./_testdata.ts";

const STORIES = testdata("models/stories260K.gguf");
const goldenCases: { prompt: string; generated_ids: number[] }[] = JSON.parse(
  readFileSync(testdata("golden/stories260K.greedy.json"), "utf8"),
).cases;
const tokenizer = Tokenizer.fromGguf(parseGguf(new Uint8Array(readFileSync(STORIES))));

/** What llama-cli prints for the first `n` golden ids: each piece in turn. */
function expectedText(prompt: string, n: number): string {
  const c = goldenCases.find((c) => c.prompt === prompt)!;
  const d = tokenizer.createDecoder();
  let s = "";
  for (const id of c.generated_ids.slice(0, n)) s += d.push(id);
  return s + d.flush();
}

Deno.test("run: greedy stories260K prints llama.cpp's text: -t 1, -t 2, -b 2, f32 cache, -p and stdin", async () => {
  const expected = expectedText("Once upon a time", 64);
  for (const threads of ["1", "2"]) {
    const out = await runCli([
      "run",
      STORIES,
      "-p",
      "Once upon a time",
      "-n",
      "64",
      "--temp",
      "0",
      "-t",
      threads,
    ]);
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout, expected, `-t ${threads}`);
    assert.match(out.stderr, /Prompt eval/);
    assert.match(out.stderr, /sampling: greedy/);
  }
  // Prefill in batches of 2 and an F32 cache give the same text.
  const base = ["run", STORIES, "-p", "Once upon a time", "-n", "64", "--temp", "0", "-q"];
  for (const extra of [["-b", "2"], ["--cache-type", "f32"]]) {
    const out = await runCli([...base, ...extra]);
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout, expected, extra.join(" "));
  }
  const file = Deno.makeTempFileSync({ suffix: ".txt" });
  try {
    Deno.writeTextFileSync(file, "Once upon a time\n"); // one trailing newline is dropped
    const out = await runCli(["run", STORIES, "-f", file, "-n", "64", "--temp", "0", "-q"]);
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout, expected, "-f FILE");
    const both = await runCli(["run", STORIES, "-f", file, "-p", "x"]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /-p or -f, not both/);
  } finally {
    Deno.removeSync(file);
  }
  const missing = await runCli(["run", STORIES, "-f", "/nonexistent/prompt.txt"]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /cannot read prompt file "\/nonexistent\/prompt.txt": ENOENT/);
  const piped = await runCli(["run", STORIES, "-n", "64", "--temp", "0", "-q"], {
    stdin: "Once upon a time\n",
  });
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(piped.stdout, expected);
  assert.equal(piped.stderr, "");
});

Deno.test("run: the empty prompt case, --echo, --json", async () => {
  const empty = await runCli(["run", STORIES, "-p", "", "-n", "80", "--temp", "0", "-q"]);
  assert.equal(empty.code, 0, empty.stderr);
  assert.equal(empty.stdout, expectedText("", 80));

  const echo = await runCli([
    "run",
    STORIES,
    "-p",
    "Once upon a time",
    "-n",
    "8",
    "--temp",
    "0",
    "-q",
    "--echo",
  ]);
  assert.equal(echo.stdout, "Once upon a time" + expectedText("Once upon a time", 8));

  const json = await runCli([
    "run",
    STORIES,
    "-p",
    "Once upon a time",
    "-n",
    "16",
    "--temp",
    "0",
    "--json",
    "-s",
    "5",
  ]);
  assert.equal(json.code, 0, json.stderr);
  const o = JSON.parse(json.stdout);
  assert.equal(o.text, expectedText("Once upon a time", 16));
  assert.deepEqual(o.tokens, goldenCases[1].generated_ids.slice(0, 16));
  assert.equal(o.finish_reason, "length");
  assert.deepEqual(o.usage, { prompt_tokens: 5, completion_tokens: 16, total_tokens: 21 });
  assert.equal(o.seed, 5);
  assert.ok(o.timings.prefill_ms > 0 && o.timings.decode_tokens_per_second > 0);
  assert.ok(o.memory.weights_bytes > 1e6 && o.memory.kv_cache_bytes > 0);
});

Deno.test("run: seeded sampling repeats, the seed is printed, context full is noted", async () => {
  const args = ["run", STORIES, "-p", "Once upon a time", "-n", "30", "-s", "1234"];
  const a = await runCli(args);
  const b = await runCli([...args, "-t", "1"]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(a.stdout, b.stdout);
  assert.match(a.stderr, /seed 1234/);
  const full = await runCli(["run", STORIES, "-p", "Once upon a time", "-c", "12", "--temp", "0"]);
  assert.equal(full.code, 0, full.stderr);
  assert.equal(full.stdout, expectedText("Once upon a time", 8));
  assert.match(full.stderr, /context of 12 tokens is full/);
  const json = await runCli(["run", STORIES, "-p", "Once", "-c", "12", "--temp", "0", "--json"]);
  assert.equal(JSON.parse(json.stdout).finish_reason, "context");
});

Deno.test("run: --stop ends before a stop string split across tokens", async () => {
  const text = expectedText("Once upon a time", 64);
  const stop = " named Lily";
  const out = await runCli([
    "run",
    STORIES,
    "-p",
    "Once upon a time",
    "-n",
    "64",
    "--temp",
    "0",
    "-q",
    "--stop",
    "xyz",
    "--stop",
    stop,
  ]);
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout, text.slice(0, text.indexOf(stop)));
});

Deno.test("run: bad input is one line on stderr, nothing on stdout", async () => {
  const cases: [string[], number, RegExp][] = [
    [
      ["run", "/nonexistent/m.gguf", "-p", "x"],
      1,
      /cannot open "\/nonexistent\/m.gguf": no such file/,
    ],
    [["run", testdata("README.md"), "-p", "x"], 1, /not a GGUF file/],
    [
      ["run", testdata("llama.cpp-vocab/ggml-vocab-falcon.gguf"), "-p", "x"],
      1,
      /unsupported architecture "falcon"/,
    ],
    [
      ["run", STORIES, "-p", "Once upon a time", "-c", "4"],
      1,
      /prompt is 5 tokens, longer than the context of 4/,
    ],
    [["run", STORIES, "-p", "x", "-n", "-5"], 2, /--n-predict must be -1 or >= 0, got -5/],
    // Bounds are the library's, reported with the flag's name, exit code 2.
    [["run", STORIES, "-p", "x", "-t", "-1"], 2, /-t\/--threads must be an integer in .*got -1/],
    [["run", STORIES, "-p", "x", "--temp", "-1"], 2, /--temp must be >= 0 \(0 = greedy\), got -1/],
    [["run", STORIES, "-p", "x", "--top-p", "1.5"], 2, /--top-p must be in \[0, 1\], got 1.5/],
    [["run", STORIES, "-p", "x", "-s", "-2"], 2, /--seed must be an integer in \[0, 4294967295\]/],
    [["run", STORIES, "-p", "x", "-c", "4096"], 2, /--ctx-size 4096 exceeds the model's training/],
    [["chat", STORIES, "--temp", "-1"], 2, /--temp must be >= 0/],
    [["serve", STORIES, "--temp", "-1"], 2, /--temp must be >= 0/],
    [["serve", STORIES, "--repeat-penalty", "0"], 2, /--repeat-penalty must be > 0/],
    [["run", STORIES, "-p", "x", "--temp", "abc"], 2, /--temp must be a number, got "abc"/],
    [["run", STORIES, "-p", "x", "--bogus"], 2, /Unknown option '--bogus'/],
    [["run", STORIES, "-p", "x", "--cache-type", "q8"], 2, /--cache-type must be one of f32, f16,/],
    [["run"], 2, /missing MODEL/],
  ];
  for (const [args, code, message] of cases) {
    const out = await runCli(args);
    assert.equal(out.code, code, `${args.join(" ")}: ${out.stderr}`);
    assert.equal(out.stdout, "", args.join(" "));
    assert.match(out.stderr, message);
    assert.equal(out.stderr.trimEnd().split("\n").length, 1, out.stderr);
  }
  // A ggml type the library does not compute (the set grows: pick one that is not in it).
  const computable = computableTypes(loadNative());
  const type = (GGML_TYPES as readonly GgmlTypeInfo[])
    .find((t) => !computable.has(t.id) && !t.removed && 64 % t.blockSize === 0)!;
  const q4 = patchedStories(type.id);
  try {
    const out = await runCli(["run", q4, "-p", "x"]);
    assert.equal(out.code, 1);
    assert.equal(out.stdout, "");
    assert.match(
      out.stderr,
      new RegExp(`tensor "blk.0.attn_q.weight" has unsupported type ${type.name} `),
    );
  } finally {
    Deno.removeSync(q4);
  }
  // -n -1 is valid (until EOG or the context is full).
  const ok = await runCli(["run", STORIES, "-p", "x", "-n", "-1", "-c", "8", "-q", "--temp", "0"]);
  assert.equal(ok.code, 0, ok.stderr);
});

Deno.test("run: a closed pipe ends quietly with exit 0", async () => {
  const cli = new Deno.Command("bash", {
    args: [
      "-c",
      `set -o pipefail; "$0" run "$1" -p "Once upon a time" -n 500 -c 600 | head -c 20`,
      "./dotllm",
      STORIES,
    ],
    stdout: "piped",
    stderr: "piped",
    cwd: new URL("..", import.meta.url).pathname,
  });
  const out = await cli.output();
  assert.equal(out.code, 0);
  assert.equal(new TextDecoder().decode(out.stdout).length <= 20, true);
  assert.equal(new TextDecoder().decode(out.stderr), "");
});

Deno.test("run: SIGINT stops generation, prints the summary, exits 130", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../cli.ts", import.meta.url).pathname,
      "run",
      STORIES,
      "-p",
      "Once",
      "-n",
      "-1",
      "-s",
      "3",
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.getReader();
  const first = await reader.read(); // generation has started
  assert.equal(first.done, false);
  child.kill("SIGINT");
  while (!(await reader.read()).done) { /* drain */ }
  const status = await child.status;
  const stderr = new TextDecoder().decode(
    new Uint8Array(await new Response(child.stderr).arrayBuffer()),
  );
  assert.equal(status.code, 130, stderr);
  assert.match(stderr, /Generation/);
});

Deno.test("run: Bun prints what Deno prints", async () => {
  const args = ["run", STORIES, "-p", "Once upon a time", "-n", "24", "--temp", "0", "-q"];
  const [deno, bun] = await Promise.all([runCli(args), runCli(args, { runtime: "bun" })]);
  assert.equal(bun.code, 0, bun.stderr);
  assert.equal(bun.stdout, deno.stdout);
  assert.equal(bun.stdout, expectedText("Once upon a time", 24));
  const piped = await runCli(["run", STORIES, "-n", "24", "--temp", "0", "-q"], {
    stdin: "Once upon a time\n",
    runtime: "bun",
  });
  assert.equal(piped.stdout, deno.stdout, "Bun, prompt from stdin");
  const bad = await runCli(["run", STORIES, "-p", "x", "--temp", "abc"], { runtime: "bun" });
  assert.equal(bad.code, 2);
  assert.equal(bad.stdout, "");
});

Deno.test("run: the summary names the file type, not the commonest tensor type (Gemma 3 270M Q4_K_M)", async () => {
  const path = ensureGemma();
  // What the file says, read with the GGUF reader (header only is enough, but the
  // reader wants the file's bytes).
  const gguf = parseGguf(new Uint8Array(readFileSync(path)));
  assert.equal(gguf.metadata.get("general.file_type"), 15); // llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
  const counts = new Map<string, number>();
  for (const t of gguf.tensors) {
    if (t.dims.length === 2) counts.set(t.type.name, (counts.get(t.type.name) ?? 0) + 1);
  }
  const commonest = [...counts].sort((a, b) => b[1] - a[1])[0][0];
  assert.notEqual(commonest, "Q4_K"); // why the file type is worth naming
  const out = await runCli([
    "run",
    path,
    "-p",
    "Hi",
    "-n",
    "1",
    "--temp",
    "0",
    "-t",
    "2",
    "-c",
    "64",
  ]);
  assert.equal(out.code, 0, out.stderr);
  const line = out.stderr.split("\n").find((l) => l.startsWith("model: "));
  assert.ok(line, out.stderr);
  assert.match(line, /, MOSTLY_Q4_K_M, /);
  assert.doesNotMatch(line, new RegExp(`, ${commonest}, `));
});

Deno.test("run: a file without general.file_type is summarised by its commonest weight type", async () => {
  const gguf = parseGguf(new Uint8Array(readFileSync(STORIES)));
  assert.equal(gguf.metadata.get("general.file_type"), undefined);
  const out = await runCli(["run", STORIES, "-p", "Once", "-n", "1", "--temp", "0", "-t", "1"]);
  assert.equal(out.code, 0, out.stderr);
  assert.match(out.stderr, /^model: .*, F32, /m);
});

/** `dotllm embed`: -p and stdin lines, --json lines, pooling and normalization flags, usage errors. @module */
import assert from "node:assert/strict";
import { Llm } from "../mod.ts";
import { runDeno } from "./_cli.ts";
import { ensureMiniLmGguf } from "./_minilm.ts";
import { repoRoot } from "./_testdata.ts";

const minilm = await ensureMiniLmGguf("f32");

Deno.test("dotllm embed: the vectors of Llm.embed, as text lines or JSON lines", async () => {
  using llm = await Llm.load(minilm, { threads: 1 });
  const [a, b] = await llm.embed(["hello world", "Bonjour le monde"]);
  const json = await runDeno([
    "embed",
    minilm,
    "-t",
    "1",
    "-p",
    "hello world",
    "-p",
    "Bonjour le monde",
    "--json",
  ]);
  assert.equal(json.code, 0, json.stderr);
  const lines = json.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => [l.index, l.tokens]), [[0, 4], [1, 7]]);
  assert.deepEqual(lines[0].embedding, Array.from(a));
  assert.deepEqual(lines[1].embedding, Array.from(b));
  // stdin: one input per non-empty line; plain output: the values separated by spaces.
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", `${repoRoot}/cli.ts`, "embed", minilm, "-t", "1"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode("hello world\n\nBonjour le monde\n"));
  await w.close();
  const out = await child.output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const plain = new TextDecoder().decode(out.stdout).trim().split("\n").map((l) =>
    l.split(" ").map(Number)
  );
  assert.deepEqual(plain, [Array.from(a), Array.from(b)]);
  // --pooling cls --embd-normalize -1: the raw first-token state.
  const [cls] = await llm.embed(["hello world"], { pooling: "cls", normalize: -1 });
  const raw = await runDeno([
    "embed",
    minilm,
    "-t",
    "1",
    "-p",
    "hello world",
    "--pooling",
    "cls",
    "--embd-normalize",
    "-1",
    "--json",
  ]);
  assert.deepEqual(JSON.parse(raw.stdout).embedding, Array.from(cls));
});

Deno.test("dotllm embed: bad flags are usage errors (exit 2), an over-long input one line (exit 1)", async () => {
  const bad = await runDeno(["embed", minilm, "-p", "x", "--pooling", "max"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--pooling must be one of mean, cls, last, none/);
  const norm = await runDeno(["embed", minilm, "-p", "x", "--embd-normalize", "-3"]);
  assert.equal(norm.code, 2);
  const long = await runDeno(["embed", minilm, "-p", Array(600).fill("word").join(" ")]);
  assert.equal(long.code, 1);
  assert.equal(
    long.stderr,
    "dotllm: input 0 has 602 tokens, more than the context's 512 per input (too large to process)\n",
  );
});

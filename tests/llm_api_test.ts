/** The library API (`mod.ts`'s `Llm`), under Deno and under Bun. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Llm } from "../mod.ts";
import { exec, goldenText, STORIES } from "./_ship.ts";
import { repoRoot, testdata } from "./_testdata.ts";

const golden: { prompt: string; generated_ids: number[] } = JSON.parse(
  readFileSync(testdata("golden/stories260K.greedy.json"), "utf8"),
).cases.find((c: { prompt: string }) => c.prompt === "Once upon a time");

Deno.test("Llm: greedy pieces are llama.cpp's ids and text, with raw-softmax logprobs", async () => {
  using llm = await Llm.load(STORIES, { threads: 2 });
  assert.equal(llm.config.vocabSize, 512);
  const ids = llm.tokenize("Once upon a time");
  assert.equal(ids[0], llm.tokenizer.bos);
  assert.equal(llm.detokenize(ids.slice(1)), "Once upon a time");

  const pieces = [];
  const it = llm.generate("Once upon a time", { temperature: 0, maxTokens: 64 });
  let next = await it.next();
  while (!next.done) {
    pieces.push(next.value);
    next = await it.next();
  }
  const result = next.value;
  assert.deepEqual(pieces.map((p) => p.token), golden.generated_ids.slice(0, 64));
  assert.equal(pieces.map((p) => p.text).join(""), goldenText("Once upon a time", 64));
  assert.equal(result.text, goldenText("Once upon a time", 64));
  assert.equal(result.finishReason, "length");

  // logprob = log softmax of the raw logits at the chosen id (computed here in float64).
  const logits = Float64Array.from(llm.context.forward(ids, 0));
  const max = Math.max(...logits);
  const logSum = Math.log(logits.reduce((s, x) => s + Math.exp(x - max), 0)) + max;
  assert.ok(Math.abs(pieces[0].logprob - (logits[pieces[0].token] - logSum)) < 1e-9);
  for (const p of pieces) assert.ok(p.logprob <= 0 && p.logprob > -30, String(p.logprob));
});

Deno.test("Llm: stop strings, seeds, break, AbortSignal, close", async () => {
  const llm = await Llm.load(STORIES, { threads: 1, contextSize: 1024 });
  const collect = async (iterable: AsyncIterable<{ text: string; token: number }>) => {
    const out = { text: "", tokens: [] as number[] };
    for await (const p of iterable) {
      out.text += p.text;
      out.tokens.push(p.token);
    }
    return out;
  };
  const stopped = await collect(
    llm.generate("Once upon a time", { temperature: 0, stop: [" girl"] }),
  );
  assert.equal(stopped.text, ", there was a little");

  const a = await collect(llm.generate("Once upon a time", { maxTokens: 40, seed: 42 }));
  const b = await collect(llm.generate("Once upon a time", { maxTokens: 40, seed: 42 }));
  assert.deepEqual(a, b);
  assert.equal(a.tokens.length, 40);

  // Breaking out stops the generation; the model is free again at once.
  let count = 0;
  for await (const _ of llm.generate("Once upon a time", { temperature: 0 })) {
    if (++count === 3) break;
  }
  assert.equal(count, 3);

  // Unstopped, "Once" runs to the 1000-token limit; aborted after 5 pieces, it
  // ends at the loop's next look at the signal (it yields at least every 50 ms).
  const full = await collect(llm.generate("Once", { temperature: 0, maxTokens: 1000 }));
  assert.equal(full.tokens.length, 1000);
  const controller = new AbortController();
  const seen: number[] = [];
  const signal = controller.signal;
  await assert.rejects(async () => {
    for await (const p of llm.generate("Once", { temperature: 0, maxTokens: 1000, signal })) {
      seen.push(p.token);
      if (seen.length === 5) controller.abort();
    }
  }, (error: Error) => error.name === "AbortError");
  assert.ok(seen.length >= 5 && seen.length < 1000, String(seen.length));
  assert.deepEqual(seen, full.tokens.slice(0, seen.length));
  await assert.rejects(
    () => collect(llm.generate("x", { signal: AbortSignal.abort() })),
    (error: Error) => error.name === "AbortError",
  );

  llm.close();
  llm.close();
  await assert.rejects(() => collect(llm.generate("Once")), /after close/);
  assert.throws(() => llm.context.forward([1], 0), /after close/);
});

Deno.test("Llm under Bun: mod.ts imports and generates the greedy text", async () => {
  const script = `
    import { Llm } from ${JSON.stringify(join(repoRoot, "mod.ts"))};
    const llm = await Llm.load(${JSON.stringify(STORIES)});
    let text = "";
    for await (const p of llm.generate("Once upon a time", { temperature: 0, maxTokens: 64 })) {
      text += p.text;
    }
    llm.close();
    process.stdout.write(text);`;
  const out = await exec("bun", ["-e", script], { env: { NO_COLOR: "1" } });
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout, goldenText("Once upon a time", 64));
});

/**
 * Speculative decoding changes no token: greedy output with n-gram prompt
 * lookup and with a draft model equals the output without, token for token,
 * on 24 prompts each (SmolLM2-135M-Instruct Q4_1, a Q8_0 draft of it, and
 * stories260K with two sequences batched); sampled output equals it seed
 * for seed, with a grammar and a logit bias; a chi-square test on 2,000
 * samples finds the sampled distribution unchanged (and tells a colder
 * temperature apart); a sliding-window model (Gemma 3) past its window
 * rewinds its ring; `dotllm serve --parallel 2` answers concurrent requests
 * as without speculation; a draft model of another vocabulary is refused
 * with llama.cpp's rule, in one line.
 */
import assert from "node:assert/strict";
import {
  DraftModel,
  draftVocabMismatch,
  Driver,
  generate,
  NgramSimple,
  probeVerifyTokens,
  Sequence,
} from "../src/generation/mod.ts";
import { Llm, type LlmGenerateOptions } from "../src/llm/mod.ts";
import { Context, Model } from "../src/model/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { ensureGemma } from "./_gemma.ts";
import { ladderFile } from "./_quant_ladder.ts";
import { runCli } from "./_run_cli.ts";
import { startServer } from "./_server.ts";
import { testdata } from "./_testdata.ts";

const SMOLLM2 = testdata("models", "SmolLM2-135M-Instruct.Q4_1.gguf");
const STORIES = testdata("models", "stories260K.gguf");
const LLAMA_TINY = testdata("models", "llama-2-tiny-random.gguf");

const CODE = `function area(width, height) {
  return width * height;
}

function perimeter(width, height) {
  return 2 * (width + height);
}

console.log(area(3, 4), perimeter(3, 4));
`;

const ARTICLE =
  "The harbor town of Weldon rebuilt its stone bridge in 1887 after a winter flood. " +
  "The mayor said the bridge would stand for a hundred years. Fishermen carried the stones " +
  "from the quarry by boat, and the bridge opened in the spring of 1888.";

/** 24 prompts: chat turns, continuations, and input-grounded ones (copy, rewrite, quote). */
const PROMPTS: string[] = [
  "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
  "<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n",
  "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
  `<|im_start|>user\nRewrite this code, renaming width to w:\n${CODE}<|im_end|>\n<|im_start|>assistant\n`,
  `<|im_start|>user\nAdd a comment above each function:\n${CODE}<|im_end|>\n<|im_start|>assistant\n`,
  `<|im_start|>user\nSummarise with quotes:\n${ARTICLE}<|im_end|>\n<|im_start|>assistant\n`,
  `<|im_start|>user\nRepeat this text exactly:\n${ARTICLE}<|im_end|>\n<|im_start|>assistant\n`,
  `${CODE}\n// The same code, with height renamed to h:\n`,
  `${ARTICLE}\nThe article again, word for word: The harbor town`,
  "One, two, three, four, five, six, seven,",
  "a b c d e f g h i j k l m n o p",
  "The quick brown fox jumps over the lazy dog. The quick brown fox",
  "Once upon a time",
  "def fibonacci(n):\n",
  "<|im_start|>user\nList the days of the week.<|im_end|>\n<|im_start|>assistant\n",
  "<|im_start|>user\nHow do I boil an egg?<|im_end|>\n<|im_start|>assistant\n",
  "Monday, Tuesday, Wednesday,",
  "SELECT name, age FROM users WHERE",
  "<ul>\n  <li>apple</li>\n  <li>banana</li>\n  <li>",
  "1. Preheat the oven. 2. Mix the flour. 3.",
  `${CODE}\nQuestion: what does area(3, 4) print? Answer:`,
  "<|im_start|>user\nTranslate to French: good morning<|im_end|>\n<|im_start|>assistant\n",
  "Roses are red, violets are blue,",
  `<|im_start|>user\nQuote the sentence about the mayor:\n${ARTICLE}<|im_end|>\n<|im_start|>assistant\n`,
];

/** Generates every prompt greedily (or with `options`) and returns token arrays and counts. */
async function runAll(
  llm: Llm,
  prompts: string[],
  options: LlmGenerateOptions,
): Promise<{ tokens: number[][]; drafted: number; accepted: number }> {
  const tokens: number[][] = [];
  let drafted = 0, accepted = 0;
  for (const prompt of prompts) {
    const result = await llm.complete(prompt, options);
    tokens.push(Array.from(result.tokens));
    drafted += result.timings.draftedTokens;
    accepted += result.timings.acceptedTokens;
  }
  return { tokens, drafted, accepted };
}

function assertSameTokens(got: number[][], want: number[][], what: string): void {
  for (let i = 0; i < want.length; i++) {
    assert.deepEqual(got[i], want[i], `${what}: prompt ${i} (${JSON.stringify(PROMPTS[i])})`);
  }
}

Deno.test("ngram-simple drafts what followed the last n tokens earlier (llama.cpp's rule)", () => {
  const ngram = new NgramSimple({ sizeN: 2, sizeM: 3 });
  const out = new Int32Array(8);
  // history 5 6 7 8 9 5 6 | last 7: "6 7" occurred at 1..2, followed by 8 9 5.
  const history = Int32Array.of(1, 6, 7, 8, 9, 5, 6);
  assert.equal(ngram.draft(0, history, 7, 8, out), 3);
  assert.deepEqual(Array.from(out.subarray(0, 3)), [8, 9, 5]);
  assert.equal(ngram.draft(0, history, 7, 2, out), 2, "the caller's limit");
  assert.equal(ngram.draft(0, history, 4, 8, out), 0, "no earlier occurrence");
  // Too short a history (<= n + m + 1 tokens) drafts nothing, as llama.cpp's.
  assert.equal(ngram.draft(0, history.subarray(0, 6), 5, 8, out), 0);
  assert.throws(() => new NgramSimple({ sizeN: 0 }), /size n must be an integer in \[1, 1024\]/);
});

Deno.test("draft vocabulary: llama.cpp's compatibility rule on real vocabularies", () => {
  const vocab = (path: string) => {
    const model = Model.load(path, { repack: false });
    try {
      return Tokenizer.fromGguf(model.gguf).vocab;
    } finally {
      model.close();
    }
  };
  const smollm = vocab(SMOLLM2), stories = vocab(STORIES), llama = vocab(LLAMA_TINY);
  assert.equal(draftVocabMismatch(smollm, smollm), undefined);
  assert.match(draftVocabMismatch(smollm, stories)!, /tokenizer is spm, the target's bpe/);
  assert.match(draftVocabMismatch(llama, stories)!, /has 512 tokens, the target 32000/);
});

Deno.test({
  name: "greedy: n-gram lookup and a draft model give SmolLM2's own tokens on 24 prompts",
  sanitizeResources: false,
  fn: async () => {
    const options = { temperature: 0, maxTokens: 40 };
    const plain = await Llm.load(SMOLLM2, { threads: 2, contextSize: 1024 });
    const want = await runAll(plain, PROMPTS, options);
    plain.close();

    const ngram = await Llm.load(SMOLLM2, {
      threads: 2,
      contextSize: 1024,
      speculation: { type: "ngram-simple", ngramSizeN: 3, ngramSizeM: 8 },
    });
    const got = await runAll(ngram, PROMPTS, options);
    ngram.close();
    assertSameTokens(got.tokens, want.tokens, "ngram-simple");
    // Both paths ran: drafts kept and drafts refused.
    assert.ok(got.accepted > 50 && got.accepted < got.drafted, JSON.stringify(got));

    const draft = await Llm.load(SMOLLM2, {
      threads: 2,
      contextSize: 1024,
      speculation: { draftModel: await ladderFile("Q8_0"), draftMax: 4 },
    });
    const drafted = await runAll(draft, PROMPTS, options);
    draft.close();
    assertSameTokens(drafted.tokens, want.tokens, "draft model Q8_0");
    assert.ok(
      drafted.accepted > 100 && drafted.accepted < drafted.drafted,
      JSON.stringify(drafted),
    );
  },
});

Deno.test({
  name:
    "sampled: the same seed gives the same tokens with speculation, with a grammar and a logit bias",
  sanitizeResources: false,
  fn: async () => {
    const prompts = PROMPTS.slice(3, 7);
    const grammar = 'root ::= "Answer: " [a-z ,.]+ "."';
    const cases: LlmGenerateOptions[] = [
      { temperature: 0.8, seed: 11, maxTokens: 32 },
      { temperature: 1.2, topK: 0, topP: 1, minP: 0, seed: 7, maxTokens: 32 },
      { temperature: 0.7, seed: 3, maxTokens: 30, grammar, logitBias: [[13, -2], [28, 1.5]] },
      { temperature: 0, maxTokens: 30, repeatPenalty: 1.3, logitBias: [[30, -Infinity]] },
    ];
    const plain = await Llm.load(SMOLLM2, { threads: 2, contextSize: 1024 });
    const want = [];
    for (const c of cases) want.push(await runAll(plain, prompts, c));
    plain.close();
    const configs = [
      { type: "ngram-simple" as const, ngramSizeN: 2, ngramSizeM: 8 },
      { draftModel: SMOLLM2, draftMax: 5 },
    ];
    for (const speculation of configs) {
      const llm = await Llm.load(SMOLLM2, { threads: 2, contextSize: 1024, speculation });
      let drafted = 0, accepted = 0;
      for (let i = 0; i < cases.length; i++) {
        const got = await runAll(llm, prompts, cases[i]);
        drafted += got.drafted;
        accepted += got.accepted;
        for (let p = 0; p < prompts.length; p++) {
          assert.deepEqual(
            got.tokens[p],
            want[i].tokens[p],
            `${llm.speculation}, case ${i}, prompt ${p}`,
          );
        }
      }
      llm.close();
      assert.ok(accepted > 20 && accepted < drafted, `${speculation}: ${accepted}/${drafted}`);
    }
  },
});

Deno.test({
  name: "two sequences batched with speculation on stories260K: each gets its own greedy tokens",
  sanitizeResources: false,
  fn: async () => {
    const model = Model.load(STORIES);
    const tokenizer = Tokenizer.fromGguf(model.gguf);
    const V = model.config.vocabSize;
    const story = (i: number) => ["Once upon a time", "The cat", "Lily and Ben", "One day"][i % 4];
    const prompts = Array.from({ length: 24 }, (_, i) => `${story(i)}${" ".repeat(i % 3)}`);
    const plain = new Context(model, { contextSize: 256, threads: 1 });
    const want: number[][] = [];
    for (const prompt of prompts) {
      const sampler = new Sampler(V, { temperature: 0 }, 1);
      const r = await generate({ context: plain }, tokenizer, sampler, { prompt, maxTokens: 60 });
      want.push(Array.from(r.tokens));
    }
    plain.close();
    const draftModel = Model.load(STORIES);
    for (const mode of ["ngram", "draft"]) {
      const context = new Context(model, { slots: 2, contextSize: 256, maxLogits: 10, threads: 1 });
      const drafter = mode === "ngram"
        ? new NgramSimple({ sizeN: 2, sizeM: 8 })
        : new DraftModel(new Context(draftModel, { slots: 2, contextSize: 256, threads: 1 }));
      const verifyTokens = probeVerifyTokens(context, 10);
      assert.ok(verifyTokens >= 5, `stories260K verifies ${verifyTokens} tokens at once`);
      const driver = Driver.of(context, {
        speculation: { drafter, draftMax: 8, verifyTokens },
      });
      let drafted = 0, accepted = 0;
      for (let i = 0; i < prompts.length; i += 2) {
        const started = [i, i + 1].map((p) => {
          const sampler = new Sampler(V, { temperature: 0 }, 1);
          const sequence = new Sequence(tokenizer, { sampler, maxTokens: 60 });
          const prompt = tokenizer.encode(prompts[p], { addSpecial: true, parseSpecial: true });
          return { p, job: driver.start(sequence, Int32Array.from(prompt)) };
        });
        while (driver.step()) { /* both sequences in each decode batch */ }
        for (const { p, job } of started) {
          assert.equal(job.error, undefined);
          assert.deepEqual(Array.from(job.sequence.tokens), want[p], `${mode}: prompt ${p}`);
          drafted += job.timings.draftedTokens;
          accepted += job.timings.acceptedTokens;
        }
      }
      assert.ok(accepted > 0 && accepted <= drafted, `${mode}: ${accepted}/${drafted}`);
      if (drafter instanceof DraftModel) drafter.context.close();
      context.close();
    }
    draftModel.close();
    model.close();
  },
});

/** Chi-square statistic of two samples' counts over the same categories (homogeneity). */
function chiSquare(a: Map<string, number>, b: Map<string, number>): { stat: number; df: number } {
  const na = [...a.values()].reduce((x, y) => x + y, 0);
  const nb = [...b.values()].reduce((x, y) => x + y, 0);
  // Categories expected fewer than 5 times in either sample are pooled into one.
  const keys = new Set([...a.keys(), ...b.keys()]);
  const cells: [number, number][] = [];
  let restA = 0, restB = 0;
  for (const k of keys) {
    const x = a.get(k) ?? 0, y = b.get(k) ?? 0;
    const total = x + y;
    if (total * Math.min(na, nb) / (na + nb) < 5) {
      restA += x;
      restB += y;
    } else cells.push([x, y]);
  }
  if (restA + restB > 0) cells.push([restA, restB]);
  let stat = 0;
  for (const [x, y] of cells) {
    const total = x + y;
    const ea = total * na / (na + nb), eb = total * nb / (na + nb);
    stat += (x - ea) ** 2 / ea + (y - eb) ** 2 / eb;
  }
  return { stat, df: cells.length - 1 };
}

/** The chi-square critical value at significance 0.001 (Wilson-Hilferty). */
function critical(df: number): number {
  const z = 3.0902; // the normal's 0.999 quantile
  const c = 2 / (9 * df);
  return df * (1 - c + z * Math.sqrt(c)) ** 3;
}

Deno.test({
  name:
    "sampled distribution unchanged: 2,000 samples with a draft model vs without, chi-square on tokens 2-3",
  sanitizeResources: false,
  fn: async () => {
    const prompt = "Once upon a time, there was a little girl named Lily. She";
    const samples = async (llm: Llm, temperature: number, seed0: number) => {
      const counts = new Map<string, number>();
      let drafted = 0, accepted = 0;
      for (let i = 0; i < 2000; i++) {
        const r = await llm.complete(prompt, { temperature, seed: seed0 + i, maxTokens: 3 });
        // Token 1 comes from the prompt's row; tokens 2 and 3 from verified drafts.
        const key = Array.from(r.tokens.subarray(1, 3)).join(" ");
        counts.set(key, (counts.get(key) ?? 0) + 1);
        drafted += r.timings.draftedTokens;
        accepted += r.timings.acceptedTokens;
      }
      return { counts, drafted, accepted };
    };
    const plain = await Llm.load(STORIES, { threads: 1, contextSize: 128 });
    const spec = await Llm.load(STORIES, {
      threads: 1,
      contextSize: 128,
      speculation: { draftModel: STORIES, draftMax: 2 },
    });
    try {
      const without = await samples(plain, 1, 1);
      const withSpec = await samples(spec, 1, 100_000); // other seeds: independent samples
      assert.ok(withSpec.accepted > 500 && withSpec.accepted < withSpec.drafted);
      const same = chiSquare(without.counts, withSpec.counts);
      assert.ok(same.df >= 10, `only ${same.df + 1} categories`);
      assert.ok(
        same.stat < critical(same.df),
        `chi-square ${same.stat.toFixed(1)} >= ${critical(same.df).toFixed(1)} (df ${same.df})`,
      );
      // The test can fail: a colder temperature is told apart.
      const colder = await samples(plain, 0.7, 200_000);
      const other = chiSquare(without.counts, colder.counts);
      assert.ok(other.stat > critical(other.df), `colder: ${other.stat.toFixed(1)}`);
    } finally {
      spec.close();
      plain.close();
    }
  },
});

Deno.test({
  name:
    "Gemma 3 past its 512-token window: n-gram speculation rewinds the ring, same greedy tokens",
  sanitizeResources: false,
  fn: async () => {
    const path = ensureGemma();
    const lines = Array.from(
      { length: 60 },
      (_, i) => `item ${i}: the ${["red", "blue", "green"][i % 3]} box holds ${i * 7} stones.`,
    );
    const prompts = [
      `${lines.join("\n")}\nitem 12: the`,
      `${lines.join("\n")}\nRepeat the list from item 40:\nitem 40:`,
      `${lines.slice(0, 50).join(" ")} Again: item 3: the`,
    ];
    const options = { temperature: 0, maxTokens: 48 };
    const load = { threads: 2, contextSize: 1024, batchSize: 32 }; // rings of 512 + 31 rows
    const plain = await Llm.load(path, load);
    const want = await runAll(plain, prompts, options);
    plain.close();
    const llm = await Llm.load(path, {
      ...load,
      speculation: { type: "ngram-simple", ngramSizeN: 3, ngramSizeM: 16 },
    });
    const got = await runAll(llm, prompts, options);
    llm.close();
    for (let i = 0; i < prompts.length; i++) assert.deepEqual(got.tokens[i], want.tokens[i]);
    assert.ok(got.accepted > 20 && got.accepted < got.drafted, JSON.stringify(got));
  },
});

Deno.test({
  name: "bad input: a draft model of another vocabulary is one line; an unknown --spec-type exit 2",
  sanitizeResources: false,
  fn: async () => {
    await assert.rejects(
      Llm.load(SMOLLM2, { threads: 1, contextSize: 256, speculation: { draftModel: STORIES } }),
      /cannot draft for this model: the draft model's tokenizer is spm, the target's bpe/,
    );
    const bad = await runCli(["run", SMOLLM2, "-p", "hi", "-n", "4", "-md", STORIES]);
    assert.equal(bad.code, 1);
    assert.equal(bad.stdout, "");
    const lines = bad.stderr.trim().split("\n");
    assert.equal(lines.length, 1, bad.stderr);
    assert.match(lines[0], /draft model ".*stories260K\.gguf" cannot draft for this model/);
    const type = await runCli(["run", STORIES, "-p", "hi", "--spec-type", "ngram-mod"]);
    assert.equal(type.code, 2);
    assert.match(
      type.stderr,
      /--spec-type must be none, draft-simple or ngram-simple, got "ngram-mod" \(llama\.cpp's; not implemented\)/,
    );
    const size = await runCli(["run", STORIES, "-p", "hi", "--spec-draft-n-max", "4"]);
    assert.equal(size.code, 2);
    assert.match(size.stderr, /--spec-draft-n-max needs speculation/);
    const range = await runCli([
      "run",
      STORIES,
      "-p",
      "hi",
      "--spec-type",
      "ngram-simple",
      "--spec-ngram-simple-size-n",
      "0",
    ]);
    assert.equal(range.code, 2);
    assert.match(
      range.stderr,
      /--spec-ngram-simple-size-n must be an integer in \[1, 1024\], got 0/,
    );
    // The summary reports the counts.
    const ok = await runCli([
      "run",
      STORIES,
      "-p",
      "Once upon a time",
      "-n",
      "40",
      "--temp",
      "0",
      "-t",
      "1",
      "-md",
      STORIES,
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(
      ok.stderr,
      /speculation: draft-simple ".*" \(n-max 3, n-min 0, p-min 0\), verify <= \d+; drafted \d+, accepted \d+/,
    );
  },
});

Deno.test({
  name:
    "serve --parallel 2 with speculation: concurrent requests get the tokens of a server without it; timings and /metrics count drafts",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const prompts = [PROMPTS[3], PROMPTS[6], PROMPTS[7], PROMPTS[8], PROMPTS[11], PROMPTS[20]];
    const complete = async (url: string, prompt: string) => {
      const response = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt, max_tokens: 32, temperature: 0 }),
      });
      assert.equal(response.status, 200);
      return await response.json();
    };
    const common = ["--parallel", "2", "-t", "2", "-c", "2048", "--metrics"];
    const plain = await startServer(SMOLLM2, common);
    const want: string[] = [];
    try {
      for (const p of prompts) want.push((await complete(plain.url, p)).choices[0].text);
    } finally {
      await plain.stop();
    }
    for (
      const spec of [
        [
          "--spec-type",
          "ngram-simple",
          "--spec-ngram-simple-size-n",
          "3",
          "--spec-ngram-simple-size-m",
          "8",
        ],
        ["-md", SMOLLM2, "--spec-draft-n-max", "4"],
      ]
    ) {
      const server = await startServer(SMOLLM2, [...common, ...spec]);
      try {
        // Three at a time on two slots: sequences join and leave each other's batches.
        const got: string[] = new Array(prompts.length);
        let drafted = 0;
        for (let i = 0; i < prompts.length; i += 3) {
          const batch = await Promise.all(
            prompts.slice(i, i + 3).map((p) => complete(server.url, p)),
          );
          batch.forEach((r, j) => {
            got[i + j] = r.choices[0].text;
            drafted += r.timings.draft_n ?? 0;
            if (r.timings.draft_n !== undefined) {
              assert.ok(r.timings.draft_n_accepted <= r.timings.draft_n);
            }
          });
        }
        assert.deepEqual(got, want, spec.join(" "));
        assert.ok(drafted > 0, `${spec.join(" ")}: nothing drafted`);
        const metrics = await (await fetch(`${server.url}/metrics`)).text();
        assert.match(metrics, new RegExp(`^dotllm_draft_tokens_total ${drafted}$`, "m"));
        assert.match(metrics, /^dotllm_draft_tokens_accepted_total [1-9]\d*$/m);
      } finally {
        await server.stop();
      }
    }
  },
});

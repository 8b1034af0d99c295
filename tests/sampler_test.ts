import assert from "node:assert/strict";
import {
  applyPenalties,
  argmax,
  Candidates,
  DEFAULT_SAMPLER_PARAMS,
  draw,
  minP,
  resolveSamplerParams,
  Rng,
  Sampler,
  type SamplerParams,
  softmax,
  temperature,
  topK,
  topP,
} from "../src/sampler/mod.ts";

function candidates(logits: number[]): Candidates {
  const c = new Candidates(logits.length);
  c.reset(new Float32Array(logits));
  return c;
}

function live(c: Candidates): number[] {
  return Array.from(c.ids.subarray(0, c.size));
}

function close(actual: number, expected: number, tolerance = 1e-6): void {
  assert.ok(Math.abs(actual - expected) <= tolerance, `${actual} != ${expected}`);
}

Deno.test("defaults are llama.cpp's", () => {
  assert.deepEqual({ ...DEFAULT_SAMPLER_PARAMS }, {
    temperature: 0.8,
    topK: 40,
    topP: 0.95,
    minP: 0.05,
    repeatPenalty: 1,
    frequencyPenalty: 0,
    presencePenalty: 0,
    repeatLastN: 64,
  });
  assert.throws(() => resolveSamplerParams({ topP: 2 }), /topP must be in \[0, 1\], got 2/);
  assert.throws(() => resolveSamplerParams({ temperature: NaN }), /temperature must be a number/);
  assert.throws(() => resolveSamplerParams({ repeatLastN: -1 }), /repeatLastN/);
  // A negative temperature or top-k is an error, not a silent greedy / keep-all.
  assert.throws(() => resolveSamplerParams({ temperature: -1 }), /temperature must be >= 0/);
  assert.throws(() => resolveSamplerParams({ topK: -1 }), /topK must be an integer >= 0/);
  assert.equal(resolveSamplerParams({ temperature: 0, topK: 0 }).temperature, 0);
});

Deno.test("penalties: divide positive, multiply negative, subtract count×freq + presence", () => {
  const c = candidates([2, -1, 3, 0.5]);
  const counts = new Int32Array(4);
  // token 0 twice, token 1 once, token 3 never.
  applyPenalties(c, [0, 1, 0], 3, 2, 0.25, 0.5, counts);
  close(c.logits[0], 2 / 2 - 2 * 0.25 - 0.5); // 0
  close(c.logits[1], -1 * 2 - 0.25 - 0.5); // -2.75
  close(c.logits[2], 3);
  close(c.logits[3], 0.5);
  assert.ok(counts.every((n) => n === 0), "scratch counts are left zeroed");
  // Only the first recentCount entries count.
  const d = candidates([2, 2]);
  applyPenalties(d, [0, 1], 1, 2, 0, 0, new Int32Array(2));
  assert.deepEqual(Array.from(d.logits), [1, 2]);
});

Deno.test("top-k keeps the k best ids, sorted, ties to the lower id", () => {
  const logits = [0.1, 5, -2, 5, 3, 7, 3, 0];
  const c = candidates(logits);
  topK(c, 4);
  assert.deepEqual(live(c), [5, 1, 3, 4]);
  const all = candidates(logits);
  topK(all, 0);
  assert.deepEqual(live(all), [5, 1, 3, 4, 6, 0, 7, 2]);
  // Against a full sort on a bigger random vocabulary.
  const rng = new Rng(7);
  const big = Array.from({ length: 5000 }, () => Math.round(rng.nextFloat() * 400) / 10);
  const expected = big.map((_, i) => i).sort((a, b) => big[b] - big[a] || a - b);
  const k = candidates(big);
  topK(k, 40);
  assert.deepEqual(live(k), expected.slice(0, 40));
});

Deno.test("softmax, top-p and min-p on a hand-computed distribution", () => {
  // logits ln(0.5), ln(0.25), ln(0.15), ln(0.1): probabilities 0.5, 0.25, 0.15, 0.1
  const logits = [0.1, 0.25, 0.5, 0.15].map(Math.log);
  const c = candidates(logits);
  softmax(c);
  assert.deepEqual(live(c), [0, 1, 2, 3], "softmax keeps the order");
  close(c.probs[2], 0.5);
  close(c.probs[1], 0.25);
  close(c.probs[3], 0.15);
  close(c.probs[0], 0.1);

  const p = candidates(logits);
  topP(p, 0.75); // 0.5 + 0.25 reaches 0.75
  assert.deepEqual(live(p), [2, 1]);
  const p2 = candidates(logits);
  topP(p2, 0.76);
  assert.deepEqual(live(p2), [2, 1, 3]);
  const p3 = candidates(logits);
  topP(p3, 1);
  assert.equal(p3.size, 4);

  const m = candidates(logits);
  minP(m, 0.29); // keeps p >= 0.145
  assert.deepEqual(live(m), [1, 2, 3]); // unsorted: filtered in place, id order kept
  const m2 = candidates(logits);
  minP(m2, 0.31);
  assert.deepEqual(live(m2), [1, 2]);
  const m3 = candidates(logits);
  topK(m3, 0);
  minP(m3, 0.29); // sorted: the prefix, best first
  assert.deepEqual(live(m3), [2, 1, 3]);
});

Deno.test("temperature sharpens and flattens the distribution", () => {
  const c = candidates([Math.log(0.75), Math.log(0.25)]);
  temperature(c, 0.5); // p ∝ 0.75², 0.25²
  softmax(c);
  close(c.probs[0], 0.9, 1e-6);
  close(c.probs[1], 0.1, 1e-6);
  const hot = candidates([Math.log(0.75), Math.log(0.25)]);
  temperature(hot, 2); // p ∝ √0.75, √0.25
  softmax(hot);
  close(hot.probs[0], Math.sqrt(0.75) / (Math.sqrt(0.75) + 0.5), 1e-6);
});

Deno.test("draw follows the distribution (20,000 seeded draws)", () => {
  const logits = [0.1, 0.25, 0.5, 0.15].map(Math.log);
  const rng = new Rng(1234);
  const counts = [0, 0, 0, 0];
  const n = 20000;
  const c = new Candidates(4);
  for (let i = 0; i < n; i++) {
    c.reset(new Float32Array(logits));
    counts[draw(c, rng)]++;
  }
  const expected = [0.1, 0.25, 0.5, 0.15];
  for (let i = 0; i < 4; i++) {
    // 4 standard deviations of a binomial proportion
    const sd = Math.sqrt(expected[i] * (1 - expected[i]) / n);
    close(counts[i] / n, expected[i], 4 * sd);
  }
});

Deno.test("greedy: argmax with ties to the lowest id, after penalties", () => {
  assert.equal(argmax(new Float32Array([1, 3, 3, 2])), 1);
  const s = new Sampler(4, { temperature: 0, repeatPenalty: 2 }, 0);
  const logits = new Float32Array([1, 3, 2.5, 2]);
  assert.equal(s.sample(logits), 1);
  s.accept(1); // 3 / 2 = 1.5 < 2.5
  assert.equal(s.sample(logits), 2);
  assert.deepEqual(Array.from(logits), [1, 3, 2.5, 2], "the caller's logits are not modified");
});

Deno.test("the penalty window holds the last repeatLastN tokens", () => {
  const s = new Sampler(3, { temperature: 0, repeatPenalty: 10, repeatLastN: 2 }, 0);
  const logits = new Float32Array([3, 2, 1]);
  s.accept(0);
  s.accept(1);
  assert.equal(s.sample(logits), 2); // 0 and 1 penalised
  s.accept(2); // window is now [1, 2]
  assert.equal(s.sample(logits), 0);
});

Deno.test("seeded sampling is reproducible and seeds differ", () => {
  const rng = new Rng(99);
  const logits = new Float32Array(Array.from({ length: 300 }, () => rng.nextFloat() * 4));
  const run = (seed: number) => {
    const s = new Sampler(300, { topK: 0, topP: 1, minP: 0, temperature: 1.5 }, seed);
    return Array.from({ length: 50 }, () => s.sample(logits));
  };
  assert.deepEqual(run(42), run(42));
  assert.notDeepEqual(run(42), run(43));
  assert.equal(new Rng(5).nextU32(), new Rng(5).nextU32());
  assert.throws(() => new Rng(-1), /seed must be an integer/);
});

Deno.test("the chain: top-p and min-p each cut inside top-k, on renormalized probabilities", () => {
  // Probabilities by id (shuffled so that the order is not the ids'); top-k 5
  // keeps 0.4, 0.2, 0.15, 0.1, 0.08 (sum 0.93), renormalized as llama.cpp does:
  // 0.430, 0.215, 0.161, 0.108, 0.086.
  const probs = [0.15, 0.08, 0.02, 0.4, 0.04, 0.01, 0.2, 0.1];
  const logits = new Float32Array(probs.map(Math.log));
  const drawn = (params: Partial<SamplerParams>, n: number) => {
    const s = new Sampler(8, { temperature: 1, ...params }, 7);
    const counts = new Map<number, number>();
    for (let i = 0; i < n; i++) {
      const id = s.sample(logits);
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    return counts;
  };
  const expectFrequencies = (
    counts: Map<number, number>,
    expected: Map<number, number>,
    n: number,
  ) => {
    assert.deepEqual([...counts.keys()].sort(), [...expected.keys()].sort());
    for (const [id, p] of expected) close(counts.get(id)! / n, p, 4 * Math.sqrt(p * (1 - p) / n));
  };
  const n = 4000;
  // top-p 0.8 binds: the renormalized sums reach 0.806 at the third token (the
  // raw ones only at the fourth: 0.85); min-p 0.05 alone would keep seven.
  expectFrequencies(
    drawn({ topK: 5, topP: 0.8, minP: 0.05 }, n),
    new Map([[3, 0.4 / 0.75], [6, 0.2 / 0.75], [0, 0.15 / 0.75]]),
    n,
  );
  // top-p 0.9 keeps four (0.914), then min-p 0.45 keeps p >= 0.45 × max: two.
  expectFrequencies(
    drawn({ topK: 5, topP: 0.9, minP: 0.45 }, n),
    new Map([[3, 2 / 3], [6, 1 / 3]]),
    n,
  );
  // top-k alone binds when top-p and min-p are loose.
  assert.deepEqual([...drawn({ topK: 2, topP: 0.99, minP: 0.01 }, 500).keys()].sort(), [3, 6]);
});

Deno.test("top-p and min-p without top-k select what a full sort selects", () => {
  const rng = new Rng(11);
  for (let trial = 0; trial < 50; trial++) {
    const n = 50 + Math.floor(rng.nextFloat() * 3000);
    const logits = Array.from({ length: n }, () => Math.round(rng.nextFloat() * 300) / 20);
    const p = rng.nextFloat();
    const sorted = candidates(logits);
    topK(sorted, 0); // a full sort first: the reference path
    topP(sorted, p);
    const partial = candidates(logits);
    topP(partial, p);
    assert.deepEqual(live(partial), live(sorted), `top-p ${p}, ${n} tokens`);
    for (const id of live(partial)) close(partial.probs[id], sorted.probs[id], 1e-6);

    const m = rng.nextFloat() * 0.5;
    const sortedMin = candidates(logits);
    topK(sortedMin, 0);
    minP(sortedMin, m);
    const unsortedMin = candidates(logits);
    minP(unsortedMin, m);
    assert.deepEqual(
      live(unsortedMin).sort((a, b) => a - b),
      live(sortedMin).sort((a, b) => a - b),
    );
  }
});

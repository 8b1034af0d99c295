/**
 * The scheduler over a fake engine whose next token hashes its slot's whole
 * cached sequence: concurrent sequences produce what each produces alone,
 * every step decodes every generating sequence, long prompts are chunked,
 * prefixes are reused, cancel frees a slot at once, and bad prompts are
 * refused.
 */
import assert from "node:assert/strict";
import { Scheduler, type SequenceEvent } from "../src/server/scheduler.ts";
import { fakeAlone, FakeEngine, fakeTokenizer } from "./_fake_engine.ts";

interface Run {
  tokens: number[];
  text: string;
  events: SequenceEvent[];
}

function submit(s: Scheduler, prompt: number[], maxTokens: number, stop: string[] = []) {
  const run: Run = { tokens: [], text: "", events: [] };
  const id = s.submit(
    { prompt: Int32Array.from(prompt), maxTokens, sampling: { temperature: 0 }, stop },
    (e) => {
      run.events.push(e);
      if (e.type === "token") run.tokens.push(e.token);
      if (e.type === "token" || e.type === "text") run.text += e.text;
    },
  );
  return { id, run };
}

function drain(s: Scheduler, limit = 10_000): number {
  let steps = 0;
  while (s.step()) if (++steps > limit) throw new Error("scheduler does not finish");
  return steps;
}

Deno.test("scheduler: concurrent greedy sequences equal each run alone", () => {
  const engine = new FakeEngine({ slots: 3, batch: 16 });
  const s = new Scheduler(engine, fakeTokenizer, { stepTokens: 16 });
  const prompts = [
    [1, 2, 3],
    [4],
    [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21],
    [
      2,
      2,
    ],
    [9, 8, 7, 6],
    [3],
  ];
  const runs = prompts.map((p, i) => submit(s, p, 5 + i * 3));
  drain(s);
  for (const [i, { run }] of runs.entries()) {
    assert.deepEqual(run.tokens, fakeAlone(prompts[i], 5 + i * 3), `request ${i}`);
    const done = run.events.at(-1)!;
    assert.equal(done.type, "done");
    if (done.type === "done") {
      assert.equal(done.finishReason, "length");
      assert.equal(done.completionTokens, 5 + i * 3);
      assert.equal(done.promptTokens, prompts[i].length);
    }
    assert.equal(run.events[0].type, "start");
  }
  assert.equal(s.busy, false);
});

Deno.test("scheduler: each step decodes every generating sequence; a long prompt is chunked", () => {
  const engine = new FakeEngine({ slots: 2, batch: 8, context: 64 });
  const s = new Scheduler(engine, fakeTokenizer, { stepTokens: 8 });
  const a = submit(s, [1, 2], 30);
  s.step(); // a prefilled, first token sampled
  const long = Array.from({ length: 40 }, (_, i) => 1 + (i % 30));
  const b = submit(s, long, 3);
  const before = engine.batches.length;
  drain(s);
  const steps = engine.batches.slice(before);
  // While `b` prefills, every step still carries `a`'s decode token.
  const prefillSteps = steps.filter((batch) => batch.some(([slot, , want]) => slot === 1 && !want));
  assert.ok(prefillSteps.length >= 5, `40 tokens in chunks of <= 7: ${prefillSteps.length} steps`);
  for (const batch of prefillSteps) {
    assert.ok(batch.length <= 8);
    assert.equal(batch.filter(([slot]) => slot === 0).length, 1, "a decodes in every step");
  }
  assert.deepEqual(a.run.tokens, fakeAlone([1, 2], 30));
  assert.deepEqual(b.run.tokens, fakeAlone(long, 3));
});

Deno.test("scheduler: a request continues from the longest cached prefix of a slot", () => {
  const engine = new FakeEngine({ slots: 2, batch: 32 });
  const s = new Scheduler(engine, fakeTokenizer);
  const first = submit(s, [1, 2, 3, 4], 6);
  const other = submit(s, [9, 9, 9], 2);
  drain(s);
  // Turn two re-sends turn one's prompt and reply (what a chat client does).
  const history = [1, 2, 3, 4, ...first.run.tokens, 7, 7];
  const second = submit(s, history, 4);
  drain(s);
  const done = second.run.events.at(-1)!;
  assert.equal(done.type, "done");
  // The last reply token was sampled but never fed: 4 + 6 - 1 positions are cached.
  if (done.type === "done") assert.equal(done.cachedTokens, 4 + 6 - 1);
  assert.deepEqual(second.run.tokens, fakeAlone(history, 4));
  assert.deepEqual(other.run.tokens, fakeAlone([9, 9, 9], 2));
  // The same prompt again: everything but its last token is reused.
  const again = submit(s, history, 4);
  drain(s);
  const d2 = again.run.events.at(-1)!;
  if (d2.type === "done") assert.equal(d2.cachedTokens, history.length - 1);
  assert.deepEqual(again.run.tokens, second.run.tokens);
});

Deno.test("scheduler: cancel frees the slot at once; queued requests wait in order", () => {
  const engine = new FakeEngine({ slots: 2 });
  const s = new Scheduler(engine, fakeTokenizer);
  const a = submit(s, [1], 50);
  const b = submit(s, [2], 50);
  const c = submit(s, [3], 4);
  s.step();
  s.step();
  assert.equal(s.stats().queueDepth, 1);
  assert.equal(c.run.tokens.length, 0);
  const seen = a.run.events.length;
  s.cancel(a.id);
  s.step();
  assert.equal(s.stats().queueDepth, 0, "c got a's slot on the next step");
  assert.equal(c.run.tokens.length, 1);
  s.cancel(b.id);
  drain(s);
  assert.equal(a.run.events.length, seen, "no events after cancel");
  assert.deepEqual(c.run.tokens, fakeAlone([3], 4));
  assert.equal(s.stats().slotsBusy, 0);
});

Deno.test("scheduler: stop strings end a reply before the string; bad prompts are refused", () => {
  const engine = new FakeEngine({ slots: 1, context: 16 });
  const s = new Scheduler(engine, fakeTokenizer);
  const alone = fakeAlone([5, 5], 8);
  const text = alone.map((t) => fakeTokenizer.tokenToPiece(t)).join("");
  const stop = text.slice(3, 5);
  const at = text.indexOf(stop);
  const r = submit(s, [5, 5], 8, [stop]);
  drain(s);
  assert.equal(r.run.text, text.slice(0, at));
  const done = r.run.events.at(-1)!;
  assert.ok(done.type === "done" && done.finishReason === "stop");

  const long = submit(s, Array(16).fill(1), 2);
  assert.deepEqual(long.run.events.map((e) => e.type), ["error"]);
  const empty = submit(s, [], 2);
  assert.ok(empty.run.events[0].type === "error" && empty.run.events[0].status === 400);
  const bad = submit(s, [1, 999], 2);
  assert.ok(bad.run.events[0].type === "error");
  // The context ends a reply with "length".
  const full = submit(s, Array(12).fill(2), -1);
  drain(s);
  const d = full.run.events.at(-1)!;
  assert.ok(d.type === "done" && d.finishReason === "length");
  assert.equal(full.run.tokens.length, 16 - 12 + 1);
});

/** The llama.cpp golden greedy outputs (`golden/*.greedy.json`) and a checker. @module */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { Context } from "../src/model/mod.ts";
import { testdata } from "./_testdata.ts";

export interface GoldenCase {
  prompt: string;
  prompt_ids: number[];
  generated_ids: number[];
  generated_text: string;
  steps: { top5: { id: number; logit: number }[] }[];
}

/** The golden cases of `golden/<name>.greedy.json`. */
export function golden(name: string): GoldenCase[] {
  return JSON.parse(readFileSync(testdata(`golden/${name}.greedy.json`), "utf8")).cases;
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** Greedy-decodes the golden case; returns the ids and the largest top-5 logit error. */
export function greedyAgainstGolden(context: Context, c: GoldenCase) {
  let logits = context.forward(c.prompt_ids, 0);
  let pos = c.prompt_ids.length;
  const ids: number[] = [];
  let maxError = 0;
  for (let i = 0; i < c.generated_ids.length; i++) {
    for (const t of c.steps[i].top5) {
      maxError = Math.max(maxError, Math.abs(logits[t.id] - t.logit));
    }
    // Feed the golden id, so one near-tie cannot derail the rest of the comparison.
    ids.push(argmax(logits));
    logits = context.forward([c.generated_ids[i]], pos++);
  }
  return { ids, maxError };
}

/** stories260K with `blk.0.attn_q.weight`'s type id patched to `typeId`. */
export function patchedStories(typeId: number): string {
  const bytes = new Uint8Array(readFileSync(testdata("models/stories260K.gguf")));
  const name = new TextEncoder().encode("blk.0.attn_q.weight");
  let at = -1;
  for (let i = 0; i < 20000 && at < 0; i++) {
    if (name.every((b, j) => bytes[i + j] === b)) at = i;
  }
  assert.ok(at > 0);
  const dv = new DataView(bytes.buffer);
  const dimsAt = at + name.length;
  const typeAt = dimsAt + 4 + dv.getUint32(dimsAt, true) * 8;
  assert.equal(dv.getUint32(typeAt, true), 0);
  dv.setUint32(typeAt, typeId, true);
  const path = Deno.makeTempFileSync({ suffix: ".gguf" });
  Deno.writeFileSync(path, bytes);
  return path;
}

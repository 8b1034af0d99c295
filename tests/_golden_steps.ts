/**
 * Compares a model's greedy decoding with a llama.cpp golden step by step:
 * every top-5 logit at every step, and the greedy id at every step whose
 * llama.cpp top1−top2 margin exceeds `idMargin` (default: the logit
 * tolerance; a closer pair may legitimately swap). The golden id is fed back each step, so one near-tie
 * cannot derail the rest of a case.
 *
 * @module
 */
import { createHash } from "node:crypto";
import type { Context } from "../src/model/mod.ts";

/** One case of a golden (`*.greedy.json`, `*.long.json`). */
export interface GoldenStepsCase {
  prompt: string;
  prompt_ids: number[];
  generated_ids: number[];
  steps: { top5: { id: number; logit: number }[]; margin_top1_top2?: number }[];
}

/** What one greedy run against a golden found. */
export interface StepsComparison {
  maxError: number;
  /** Steps whose id differs although llama.cpp's margin exceeds the tolerance. */
  idMismatches: string[];
  /** Steps whose margin is within `idMargin` (ids not compared). */
  closeSteps: number;
  /** sha256 of every logits row, for comparing thread counts. */
  logitsHash: string;
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** Runs every case from an empty cache and compares it with the golden. */
export function compareSteps(
  context: Context,
  cases: readonly GoldenStepsCase[],
  tolerance: number,
  idMargin: number = tolerance,
): StepsComparison {
  const hash = createHash("sha256");
  let maxError = 0;
  let closeSteps = 0;
  const idMismatches: string[] = [];
  for (const [k, c] of cases.entries()) {
    let logits = context.forward(c.prompt_ids, 0);
    let pos = c.prompt_ids.length;
    for (let i = 0; i < c.generated_ids.length; i++) {
      const step = c.steps[i];
      hash.update(new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength));
      for (const t of step.top5) maxError = Math.max(maxError, Math.abs(logits[t.id] - t.logit));
      const margin = step.margin_top1_top2 ?? step.top5[0].logit - step.top5[1].logit;
      const id = argmax(logits);
      if (margin <= idMargin) closeSteps++;
      else if (id !== c.generated_ids[i]) {
        idMismatches.push(
          `case ${k} step ${i}: ${id} (logit ${logits[id]}) != ${c.generated_ids[i]} ` +
            `(llama.cpp ${step.top5[0].logit}, ours ${logits[c.generated_ids[i]]})`,
        );
      }
      if (i + 1 < c.generated_ids.length) logits = context.forward([c.generated_ids[i]], pos++);
    }
  }
  return { maxError, idMismatches, closeSteps, logitsHash: hash.digest("hex") };
}

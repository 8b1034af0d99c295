/**
 * Acceptance of `dotllm quantize` against llama-quantize (golden/quantize.json):
 * the real SmolLM2 Q4_1 file to F32 (checks Q4_1 and Q8_0 dequantization bit for
 * bit), then that F32 file to every type and mix of the ladder, each output
 * byte-identical. Outputs land in the ignored models/ folder (the ladder other
 * tests reuse).
 */
import assert from "node:assert/strict";
import { existsSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { runBun, runDeno } from "./_cli.ts";
import { ensureGemma } from "./_gemma.ts";
import { ladderF32, modelsDir, quantizeGolden, sha256File, sourceModel } from "./_quant_ladder.ts";
import { parseQuantType } from "../src/quantize/ftype.ts";
import { planFile } from "../src/quantize/quantize.ts";

/** Runs `dotllm quantize ARGS IN OUT TYPE 2` to a scratch file; returns its sha256. */
async function quantizeWithCli(
  args: string[],
  input: string,
  type: string,
  keepAs: string,
  run = runDeno,
): Promise<string> {
  const scratch = join(modelsDir, `.quantize-test-${type}-${crypto.randomUUID()}.gguf`);
  try {
    const result = await run(["quantize", ...args, input, scratch, type, "2"]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, "");
    assert.match(result.stderr, /^dotllm: wrote /m);
    const sha = sha256File(scratch);
    if (!existsSync(keepAs) || sha256File(keepAs) !== sha) renameSync(scratch, keepAs);
    return sha;
  } finally {
    rmSync(scratch, { force: true });
  }
}

Deno.test("quantize: Q4_1 SmolLM2 -> F32 equals llama-quantize --allow-requantize", async () => {
  assert.equal(sha256File(sourceModel), quantizeGolden.source.sha256, "the source file");
  const { f32 } = quantizeGolden;
  const sha = await quantizeWithCli(
    ["--allow-requantize"],
    sourceModel,
    "F32",
    join(modelsDir, f32.file),
  );
  assert.equal(sha, f32.sha256);
});

Deno.test("quantize: every ladder type's plan has llama-quantize's file size", async () => {
  const f32 = await ladderF32();
  for (const entry of quantizeGolden.ladder) {
    const plan = planFile(f32, { type: parseQuantType(entry.type)!, pure: entry.pure });
    assert.equal(plan.fileSizeBytes, entry.bytes, `${entry.type}${entry.pure ? " --pure" : ""}`);
  }
});

/**
 * Entries quantized on every run (they cover every code path: legacy and K types, a mix
 * with fallbacks, --pure); the rest are quantized once per machine into models/ and their
 * sha256 checked on every run. DOTLLM_QUANTIZE_FRESH=1 quantizes every entry again.
 */
const ALWAYS = new Set(["Q4_0", "Q8_0", "Q2_K", "Q4_K_M", "Q6_K --pure"]);
const fresh = Deno.env.get("DOTLLM_QUANTIZE_FRESH") === "1";

for (const entry of quantizeGolden.ladder) {
  const label = `${entry.type}${entry.pure ? " --pure" : ""}`;
  Deno.test(`quantize: F32 -> ${label} is byte-identical to llama-quantize`, async () => {
    const f32 = await ladderF32();
    const keep = join(modelsDir, entry.file);
    if (!fresh && !ALWAYS.has(label) && existsSync(keep) && sha256File(keep) === entry.sha256) {
      console.log(`${entry.file}: made by dotllm quantize earlier on this machine, sha256 matches`);
      return;
    }
    const sha = await quantizeWithCli(entry.pure ? ["--pure"] : [], f32, entry.type, keep);
    assert.equal(sha, entry.sha256);
  });
}

Deno.test("quantize: the same bytes under Bun (F32 -> Q8_0)", async () => {
  const entry = quantizeGolden.ladder.find((e) => e.type === "Q8_0" && !e.pure)!;
  const sha = await quantizeWithCli(
    [],
    await ladderF32(),
    "Q8_0",
    join(modelsDir, entry.file),
    runBun,
  );
  assert.equal(sha, entry.sha256);
});

Deno.test("quantize: Gemma 3 270M Q4_K_M -> F32 equals llama-quantize (Q4_K Q5_0 Q6_K Q8_0)", async () => {
  const source = ensureGemma();
  const { gemma3_f32 } = quantizeGolden as unknown as {
    gemma3_f32: { sha256: string; bytes: number };
  };
  const out = join(modelsDir, `.quantize-test-gemma-${crypto.randomUUID()}.gguf`);
  try {
    const result = await runDeno(["quantize", "--allow-requantize", source, out, "F32"]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(statSync(out).size, gemma3_f32.bytes);
    assert.equal(sha256File(out), gemma3_f32.sha256);
  } finally {
    rmSync(out, { force: true });
  }
});

/**
 * The K-quant kernels of ffi/quant_k.zig on a real model: every Q4_K and Q6_K tensor of
 * Gemma 3 270M Q4_K_M dequantizes and requantizes to ggml's exact bytes (goldens in
 * tests/golden/quant_k_gemma.json, made with the reference llama.cpp's libggml-base).
 * SmolLM2's ffn_down tensors (f32 = its Q4_1 file dequantized, as llama-quantize's ladder
 * starts) quantize to ggml's bytes in all six K types (tests/golden/quant_k_smollm2.json).
 * The check itself is Zig (ffi/quant_k_gguf_test.zig), run here with `zig test` on the
 * downloaded file.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { ensureGemma } from "./_gemma.ts";
import { repoRoot, testdata } from "./_testdata.ts";

Deno.test({
  name:
    "K-quants on real models: Gemma 3 Q4_K_M tensors round-trip and SmolLM2 tensors quantize bit-exactly as ggml",
  sanitizeResources: false,
  fn() {
    const gguf = ensureGemma();
    const r = spawnSync(
      "zig",
      ["test", "-fllvm", "-OReleaseFast", join("ffi", "quant_k_gguf_test.zig")],
      {
        cwd: repoRoot,
        encoding: "utf8",
        env: {
          ...Deno.env.toObject(),
          DOTLLM_QUANT_K_GGUF: gguf,
          DOTLLM_QUANT_K_GOLDEN: join(repoRoot, "tests", "golden", "quant_k_gemma.json"),
          DOTLLM_QUANT_K_SMOLLM2: testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
          DOTLLM_QUANT_K_SMOLLM2_GOLDEN: join(repoRoot, "tests", "golden", "quant_k_smollm2.json"),
        },
      },
    );
    const output = `${r.stdout}${r.stderr}`;
    assert.equal(r.status, 0, output);
    // Both Zig tests ran and passed (the runner also counts any test of an imported file).
    assert.match(output, /dequantize and requantize as ggml does\.\.\.checked 36 tensors\s+OK/);
    assert.match(output, /K-quant ladder bytes\.\.\.checked 18 ladder tensors\s+OK/);
    assert.match(output, /All \d+ tests passed/);
  },
});

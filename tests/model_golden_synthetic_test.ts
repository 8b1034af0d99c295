/**
 * dotllm against llama.cpp on the synthetic models of `deno task make-model`:
 * greedy ids and top-5 logits equal the goldens in `tests/golden/` (made once
 * with the reference llama.cpp build; see `tests/golden/README.md`), at 1 and
 * 2 threads, bit-identical between them. The model maker is deterministic,
 * so each test first checks that the file it made has the golden's sha256.
 * Steps are compared as `tests/_golden_steps.ts` says.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { makeModel, MODEL_SHAPES, type ModelType } from "../src/gguf/make_model.ts";
import { Context, Model } from "../src/model/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { ensureGemma } from "./_gemma.ts";
import { compareSteps } from "./_golden_steps.ts";
import { ReferenceKernels } from "./_reference_kernels.ts";
import { repoRoot, testdata } from "./_testdata.ts";

interface Golden {
  model: string;
  model_sha256: string;
  n_ctx: number;
  cases: {
    prompt: string;
    prompt_ids: number[];
    generated_ids: number[];
    steps: { top5: { id: number; logit: number }[]; margin_top1_top2: number }[];
  }[];
}

/** A golden of `tests/golden/`. */
function readGolden(name: string): Golden {
  return JSON.parse(readFileSync(join(repoRoot, "tests", "golden", name), "utf8"));
}

function sha256File(path: string): string {
  const hash = createHash("sha256");
  const fd = openSync(path, "r");
  const chunk = new Uint8Array(1 << 24);
  for (let n; (n = readSync(fd, chunk)) > 0;) hash.update(chunk.subarray(0, n));
  return hash.digest("hex");
}

/**
 * The synthetic models with goldens and the top-5 logit tolerance of each.
 * Measured max errors are in the comments (both thread counts).
 */
const CASES: {
  shape: string;
  type: ModelType;
  golden: string;
  tolerance: number;
  /** Thread counts to run (default 1 and 2). */
  threads?: number[];
  /** Run on the scalar TypeScript reference kernels (ops the Zig kernels lack yet). */
  reference?: boolean;
  /** Prefill batch (default 512); a small one makes the sliding-window rings wrap. */
  batchSize?: number;
  /** The KV cache bytes the context must report (the rings' size, not the context's). */
  kvCacheBytes?: number;
  /** Why the test cannot run yet (the architecture table of issue 12 is not merged). */
  pending?: string;
}[] = [
  // Measured 4.3e-4 (logits about 2.2; llama.cpp keeps K/V and the attention in F16).
  { shape: "smollm-135m", type: "f32", golden: "smollm-135m-f32.greedy.json", tolerance: 2e-3 },
  // Measured 1.2e-3.
  { shape: "smollm-135m", type: "f16", golden: "smollm-135m-f16.greedy.json", tolerance: 5e-3 },
  // Measured 1.9e-2 (2.2e-2 with main's kernels of 17:00), as large as llama.cpp's own change between Q8_0 and F32 activations with the
  // same (dequantized) weights, 2.2e-2: quantizing activations turns 1e-7 float-order noise into
  // whole quantization steps now and then (one matmul matches ggml within 4e-7; the dequantized
  // F32 model within 2.6e-4; see tests/golden/README.md). The greedy ids all match.
  { shape: "smollm-135m", type: "q8_0", golden: "smollm-135m-q8_0.greedy.json", tolerance: 0.03 },
  {
    shape: "llama-3.2-1b",
    type: "q8_0",
    golden: "llama-3.2-1b-q8_0.greedy.json",
    // Measured 0.139 (logits about 4): the Q8_0 amplification above, over 16 layers of 2048;
    // 7 of 64 ids differ at margins between 0.01 and 0.2. A wrong op gives errors of order 1.
    tolerance: 0.2,
    // One thread count: two 1B prefills of ~300 tokens take ~30 s here; `run_synthetic_test.ts`
    // and the kernel tests cover thread determinism.
    threads: [2],
  },
  // The architectures of issue 12 (f32 weights, so only the activations differ from llama.cpp):
  // on the reference kernels, and on the Zig kernels where they have every op needed.
  ...["qwen2-tiny", "qwen3-tiny", "gemma3-tiny", "phi3-tiny", "mistral-tiny"].map((shape) => ({
    shape,
    type: "f32" as const,
    golden: `${shape}-f32.greedy.json`,
    tolerance: 0.01,
    reference: true,
  })),
  {
    // Batches of 16: the five sliding layers keep rings of 64 + 16 - 1 = 79 rows, which the
    // 313-token prompt wraps four times. K+V, F16: 2 × 2 bytes × 256 × (5 × 79 + 4096) rows.
    shape: "gemma3-tiny",
    type: "f32",
    golden: "gemma3-tiny-f32.greedy.json",
    tolerance: 0.01,
    reference: true,
    batchSize: 16,
    kvCacheBytes: 2 * 2 * 256 * (5 * 79 + 4096),
  },
  {
    shape: "phi3-tiny",
    type: "f32",
    golden: "phi3-tiny-f32.ctx8192.greedy.json", // past the original context: the long factors
    tolerance: 0.01,
    reference: true,
  },
  ...["qwen2-tiny", "qwen3-tiny", "gemma3-tiny", "phi3-tiny", "mistral-tiny"].map((shape) => ({
    shape,
    type: "f32" as const,
    golden: `${shape}-f32.greedy.json`,
    tolerance: 0.01,
  })),
  {
    shape: "gemma3-tiny",
    type: "f32",
    golden: "gemma3-tiny-f32.greedy.json",
    tolerance: 0.01,
    batchSize: 16,
    kvCacheBytes: 2 * 2 * 256 * (5 * 79 + 4096),
  },
  {
    shape: "qwen2.5-0.5b",
    type: "q8_0",
    golden: "qwen2.5-0.5b-q8_0.greedy.json",
    tolerance: 0.06, // measured 3.9e-2, then 4.3e-2 with main's kernels; Q8_0 on random weights: see the SmolLM and 1B cases
    threads: [2],
  },
];

for (const c of CASES) {
  const name = `${c.shape}-${c.type}.gguf`;
  Deno.test({
    name: `golden: synthetic ${name}${c.golden.includes("ctx") ? ` (${c.golden})` : ""}` +
      `${c.batchSize ? ` in batches of ${c.batchSize} (sliding-window rings wrap)` : ""}: ` +
      `greedy ids and top-5 logits = llama.cpp's (±${c.tolerance})` +
      (c.reference
        ? ", reference kernels"
        : (c.threads ?? [1, 2]).length > 1
        ? ", bit-identical at 1 and 2 threads"
        : "") +
      (c.pending ? ` [not run: ${c.pending}]` : ""),
    ignore: c.pending !== undefined,
    fn() {
      const outDir = join(repoRoot, "models");
      if (MODEL_SHAPES[c.shape].vocabFrom === "gemma-3-270m") ensureGemma();
      const { path } = makeModel({
        shape: c.shape,
        type: c.type,
        outDir,
        vocabDir: testdata("vocab-converted"),
      });
      const golden = readGolden(c.golden);
      assert.equal(
        sha256File(path),
        golden.model_sha256,
        `${path} differs from the golden's model`,
      );
      const hashes: string[] = [];
      for (const threads of c.reference ? [1] : c.threads ?? [1, 2]) {
        const native = loadNative();
        const kernels = c.reference ? new ReferenceKernels(native) : undefined; // close() no-op
        // Repacked weights run on the library's kernels only.
        using model = Model.load(path, { repack: kernels === undefined });
        using context = new Context(model, {
          threads,
          kernels,
          contextSize: golden.n_ctx,
          batchSize: c.batchSize,
        });
        if (c.kvCacheBytes !== undefined) {
          assert.equal(context.memory.kvCacheBytes, c.kvCacheBytes);
        }
        const r = compareSteps(context, golden.cases, c.tolerance);
        console.log(
          `${name} ${c.reference ? "reference kernels" : `-t ${threads}`}: max top-5 logit error ${
            r.maxError.toExponential(2)
          }, ` +
            `${r.closeSteps} steps within the tolerance (ids not compared)`,
        );
        assert.deepEqual(r.idMismatches, [], `${threads} threads: greedy ids differ`);
        assert.ok(
          r.maxError <= c.tolerance,
          `${threads} threads: max top-5 logit error ${r.maxError} > ${c.tolerance}`,
        );
        hashes.push(r.logitsHash);
      }
      for (const h of hashes) assert.equal(h, hashes[0], "logits bit-identical across threads");
    },
  });
}

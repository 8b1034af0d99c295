/**
 * `dotllm run` on the synthetic models `deno task make-model` writes into
 * `models/` (SmolLM-135M shape in Q8_0, F16, F32; Llama-3.2-1B shape in Q8_0):
 * each runs, and its greedy tokens are identical at -t 1 and -t 2. A model
 * not made yet is reported as ignored, not passed.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "./_run_cli.ts";
import { repoRoot } from "./_testdata.ts";

const models = [
  "smollm-135m-q8_0.gguf",
  "smollm-135m-f16.gguf",
  "smollm-135m-f32.gguf",
  "llama-3.2-1b-q8_0.gguf",
];

for (const name of models) {
  const path = join(repoRoot, "models", name);
  Deno.test({
    name: `run: synthetic ${name}: greedy tokens identical at -t 1 and -t 2`,
    ignore: !existsSync(path),
    async fn() {
      const tokens: number[][] = [];
      for (const threads of ["1", "2"]) {
        const args = ["run", path, "-p", "Hello, my name is", "-n", "6", "--temp", "0"];
        const out = await runCli([...args, "-t", threads, "--json", "-c", "256"]);
        assert.equal(out.code, 0, out.stderr);
        const result = JSON.parse(out.stdout);
        assert.equal(result.tokens.length, 6);
        tokens.push(result.tokens);
      }
      assert.deepEqual(tokens[1], tokens[0]);
    },
  });
}

/**
 * `dotllm run` on the synthetic models of `deno task make-model` (SmolLM-135M
 * shape in Q8_0, F16, F32; Llama-3.2-1B shape in Q8_0): each runs, and its
 * greedy tokens are identical at -t 1 and -t 2. The test writes a model into
 * the ignored `models/` folder when it is missing (the 1.3 GB one takes ~30 s
 * once; later runs find it up to date).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { makeModel, type ModelType } from "../src/gguf/make_model.ts";
import { runCli } from "./_run_cli.ts";
import { repoRoot, testdata } from "./_testdata.ts";

const models: Array<[string, ModelType]> = [
  ["smollm-135m", "q8_0"],
  ["smollm-135m", "f16"],
  ["smollm-135m", "f32"],
  ["llama-3.2-1b", "q8_0"],
];

for (const [shape, type] of models) {
  const name = `${shape}-${type}.gguf`;
  Deno.test({
    name: `run: synthetic ${name}: greedy tokens identical at -t 1 and -t 2`,
    async fn() {
      const { path } = makeModel({
        shape,
        type,
        outDir: join(repoRoot, "models"),
        vocabDir: testdata("vocab-converted"),
      });
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

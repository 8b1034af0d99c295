/**
 * The acceptance case on the real chat model: `dotllm run
 * SmolLM2-135M-Instruct.Q4_1.gguf --chat --temp 0 -n 64 -p "What is the
 * capital of France?"` prints llama.cpp's greedy reply (the chat-formatted
 * case of `golden/smollm2-135m-instruct-q4_1.greedy.json`, which uses the
 * GGUF's default system prompt). The rendered prompt and its token ids are
 * checked in any case; the generation needs the Q4_1 kernels, and is reported
 * as ignored (not silently skipped) while the engine cannot load the file.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chatTemplateFor } from "../src/chat/mod.ts";
import { openGguf } from "../src/gguf/mod.ts";
import { LlamaModel, ModelError } from "../src/model/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { repoRoot, testdata } from "./_testdata.ts";

const MODEL = testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf");
const QUESTION = "What is the capital of France?";
const golden = JSON.parse(
  readFileSync(testdata("golden/smollm2-135m-instruct-q4_1.greedy.json"), "utf8"),
);
const chatCase = golden.cases.find((c: { parse_special: boolean }) => c.parse_special);

function q4_1Loads(): boolean {
  try {
    LlamaModel.load(MODEL, { contextSize: 64, threads: 1 }).close();
    return true;
  } catch (error) {
    if (error instanceof ModelError && /unsupported type/.test(error.message)) return false;
    throw error;
  }
}

Deno.test("chat: SmolLM2's template renders the golden's chat prompt, tokenized to its ids", () => {
  using file = openGguf(MODEL);
  const tokenizer = Tokenizer.fromGguf(file.gguf);
  const prompt = chatTemplateFor(file.gguf, tokenizer).render([{
    role: "user",
    content: QUESTION,
  }]);
  assert.equal(prompt, chatCase.prompt);
  assert.deepEqual(
    tokenizer.encode(prompt, { addSpecial: true, parseSpecial: true }),
    chatCase.prompt_ids,
  );
});

Deno.test({
  name: "chat: run --chat on SmolLM2-135M-Instruct Q4_1 prints llama.cpp's greedy reply" +
    (q4_1Loads() ? "" : " (ignored until the engine loads Q4_1)"),
  ignore: !q4_1Loads(),
  async fn() {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--allow-ffi",
        "--allow-read",
        "--allow-env",
        "--allow-sys=homedir",
        join(repoRoot, "cli.ts"),
        "run",
        MODEL,
        "--chat",
        "--temp",
        "0",
        "-n",
        "64",
        "-p",
        QUESTION,
        "--json",
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    const result = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(result.prompt, chatCase.prompt);
    const expected = (chatCase.generated_ids as number[]).filter((_id, i, all) =>
      i < all.length - 1 || result.finish_reason !== "stop"
    );
    assert.deepEqual(result.tokens, expected);
    assert.equal(result.text, chatCase.generated_text);
  },
});

/**
 * The acceptance case on the real chat model: `dotllm run
 * SmolLM2-135M-Instruct.Q4_1.gguf --chat --temp 0 -n 64 -p "What is the
 * capital of France?"` prints llama.cpp's greedy reply (the chat-formatted
 * case of `golden/smollm2-135m-instruct-q4_1.greedy.json`, which uses the
 * GGUF's default system prompt). The rendered prompt and its token ids are
 * checked in any case; the generation is reported as ignored, with the reason
 * (not silently skipped), while the engine cannot load the file or does not
 * yet reproduce llama.cpp's greedy tokens on the golden's plain prompt.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chatTemplateFor } from "../src/chat/mod.ts";
import { openGguf } from "../src/gguf/mod.ts";
import { Context, Model, ModelError } from "../src/model/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { Llm } from "../src/llm/mod.ts";
import { repoRoot, testdata } from "./_testdata.ts";
import { cli, nextTurnTokens, notes } from "./_chat.ts";

const MODEL = testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf");
const QUESTION = "What is the capital of France?";
const golden = JSON.parse(
  readFileSync(testdata("golden/smollm2-135m-instruct-q4_1.greedy.json"), "utf8"),
);
const chatCase = golden.cases.find((c: { parse_special: boolean }) => c.parse_special);

/**
 * Why the generation check cannot run yet, or undefined when it can. The
 * chat case needs the engine to load Q4_1 and to reproduce llama.cpp's greedy
 * tokens on the golden's plain prompt ("The capital of France is"): if even
 * that differs, the engine is not there yet and a chat mismatch would say
 * nothing about chat.
 */
async function notYet(): Promise<string | undefined> {
  try {
    using model = Model.load(MODEL);
    new Context(model, { contextSize: 64, threads: 1 }).close();
  } catch (error) {
    if (error instanceof ModelError && /unsupported type/.test(error.message)) {
      return "the engine does not load Q4_1";
    }
    throw error;
  }
  const plain = golden.cases.find((c: { prompt: string }) =>
    c.prompt === "The capital of France is"
  );
  using llm = await Llm.load(MODEL, { threads: 1 });
  const ids: number[] = [];
  for await (const p of llm.generate(plain.prompt, { temperature: 0, maxTokens: 64 })) {
    ids.push(p.token);
  }
  const at = ids.findIndex((id, i) => id !== plain.generated_ids[i]);
  return at < 0 ? undefined : `the engine's Q4_1 greedy tokens differ from llama.cpp's on the ` +
    `plain prompt too (from token ${at})`;
}
const waiting = await notYet();

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
    (waiting === undefined ? "" : ` (ignored: ${waiting})`),
  ignore: waiting !== undefined,
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

Deno.test({
  name: "chat: SmolLM2 Q4_1, two scripted turns: the second prefills only its own tokens" +
    (waiting === "the engine does not load Q4_1" ? ` (ignored: ${waiting})` : ""),
  ignore: waiting === "the engine does not load Q4_1",
  async fn() {
    const n = 48;
    const out = await cli(
      ["chat", MODEL, "-n", String(n), "--temp", "0", "-t", "1", "-c", "1024"],
      "What is the capital of France?\nAnd of Italy?\n",
    );
    assert.equal(out.code, 0, out.stderr);
    const [first, second] = notes(out.stderr);
    assert.ok(second !== undefined, out.stderr);
    // The real model ends its reply with <|im_end|> (sampled, never run through the
    // model) or hits -n (its last token sampled, not run): either way one token the
    // cache lacks, then what the template adds for the new message.
    const endedByEog = first.generated < n;
    // The cache keeps that prefix from a multiple of 8 on (the driver's batch-invariant order).
    const common = first.prefilled + first.generated - (endedByEog ? 0 : 1);
    assert.equal(second.cached, common - common % 8);
    const added = nextTurnTokens(MODEL, "And of Italy?");
    assert.equal(second.prefilled, added + (endedByEog ? 0 : 1) + common % 8);
    assert.equal(out.stdout.split("\n\n").length, 3, JSON.stringify(out.stdout));
  },
});

/**
 * Makes `llamacpp_lazy.json`: what the reference llama-server answers on
 * `POST /completion` with a lazy grammar (`grammar_lazy`, `grammar_triggers`),
 * greedily, on SmolLM2-135M-Instruct in F32 (`models/smollm2-f32.gguf`, made by
 * the tests). Run from the repository root:
 *
 *     deno run -A tests/golden/grammar/make_lazy.ts /work/ref/lcpp-build/bin/llama-server
 *
 * @module
 */
import { writeFileSync } from "node:fs";
import { withReferenceServer } from "../_reference_server.ts";

const [server] = Deno.args;
const MODEL = "models/smollm2-f32.gguf";
const PORT = 18733;
const CHAT = (q: string) => `<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n`;
const WORD = 1, PATTERN = 2, PATTERN_FULL = 3;

interface Case {
  name: string;
  prompt: string;
  grammar: string;
  triggers: { type: number; value: string }[];
}

const CASES: Case[] = [
  {
    name: "word, at a token boundary",
    prompt: "List three fruits as JSON: ",
    grammar: String.raw`root ::= "` + "```json\\n" + String.raw`{\"fruits\": [" fruit ", " fruit ", " fruit "]}\n` + "```" + String.raw`"
fruit ::= "\"" [A-Z] [a-z]+ "\""`,
    triggers: [{ type: WORD, value: "```json" }],
  },
  {
    name: "word, starting inside a token",
    prompt: "Write a function call to get the weather in Paris.\n",
    grammar: String.raw`root ::= "ity, which is " [a-z ]+ "."`,
    triggers: [{ type: WORD, value: "ity," }],
  },
  {
    name: "word that never appears",
    prompt: "Question: What color is the sky?\nAnswer:",
    grammar: String.raw`root ::= "Blue sky" [a-z ]* "."`,
    triggers: [{ type: WORD, value: "Blue sky" }],
  },
  {
    name: "pattern with a capture group",
    prompt: CHAT("What is the capital of France? Reply as JSON."),
    grammar: String.raw`root ::= "{\n  \"capital\": \"" [A-Z] [a-z]+ "\"\n}"`,
    triggers: [{ type: PATTERN, value: String.raw`\n(\{)` }],
  },
  {
    name: "full pattern",
    prompt: CHAT("What is the capital of France? Reply as JSON."),
    grammar: String.raw`root ::= "{" [ \n]* "\"city\": " ("\"Paris\"" | "\"Lyon\"") [ \n]* "}"`,
    triggers: [{ type: PATTERN_FULL, value: String.raw`[\s\S]*?(\{)[\s\S]*` }],
  },
  {
    name: "two words, one appears",
    prompt: CHAT("What is the capital of France? Reply as JSON."),
    grammar: String.raw`root ::= "\"title\": \"" [A-Za-z ]+ "\"" [\n ]* "}"`,
    triggers: [{ type: WORD, value: String.raw`"nothing"` }, { type: WORD, value: String.raw`"title"` }],
  },
];

const args = ["-m", MODEL, "-t", "1", "-c", "512", "--no-warmup", "-np", "1"];
await withReferenceServer(server, args, PORT, async () => {
  const out = [];
  for (const c of CASES) {
    const res = await fetch(`http://127.0.0.1:${PORT}/completion`, {
      method: "POST",
      body: JSON.stringify({
        prompt: c.prompt,
        n_predict: 48,
        temperature: 0,
        grammar: c.grammar,
        grammar_lazy: true,
        grammar_triggers: c.triggers,
        return_tokens: true,
        cache_prompt: false,
      }),
    });
    const body = await res.json();
    if (!res.ok) throw new Error(`${c.name}: ${JSON.stringify(body)}`);
    out.push({
      ...c,
      text: body.content,
      tokens: body.tokens,
      stop: body.stop_type,
    });
    console.log(c.name, JSON.stringify(body.content));
  }
  writeFileSync(
    "tests/golden/grammar/llamacpp_lazy.json",
    JSON.stringify(
      {
        command: `llama-server -m ${MODEL} -t 1 -c 512 --no-warmup -np 1; POST /completion ` +
          `{prompt, n_predict: 48, temperature: 0, grammar, grammar_lazy: true, grammar_triggers, ` +
          `return_tokens: true, cache_prompt: false} (tests/golden/grammar/make_lazy.ts)`,
        cases: out,
      },
      null,
      1,
    ) + "\n",
  );
});

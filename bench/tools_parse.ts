/**
 * What streaming a tool call costs the parser: a server re-parses the whole output after
 * every token (as llama-server does), so the cost per token grows with the output. A
 * Qwen 3 answer (a 4.5k-character reasoning block, then a `<tool_call>` whose JSON code
 * argument is 3.3k characters) and a Qwen3-Coder XML call are parsed at every 4th
 * character (about a token), with the streamed diffs; reported: parses, mean and last
 * time per parse, and the total.
 *
 *   deno run -A bench/tools_parse.ts [-r 5]
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  computeDiffs,
  detectToolFormat,
  parseChatOutput,
  type ParsedMessage,
} from "../src/tools/mod.ts";
import { ensureLlamaCppSource } from "../tests/_llamacpp_src.ts";

const { values } = parseArgs({ options: { r: { type: "string", default: "5" } } });
const rounds = Number(values.r);
const templates = join(ensureLlamaCppSource(), "models", "templates");
const tools = [{
  type: "function" as const,
  function: {
    name: "python",
    parameters: { type: "object", properties: { code: { type: "string" } } },
  },
}];
const code = "print('x')\n".repeat(300);
const cases: [string, string][] = [
  [
    "Qwen-Qwen3-0.6B.jinja",
    `<think>\n${"I think. ".repeat(500)}\n</think>\n\n<tool_call>\n` +
    JSON.stringify({ name: "python", arguments: { code } }) + "\n</tool_call>",
  ],
  [
    "Qwen3-Coder.jinja",
    `<tool_call>\n<function=python>\n<parameter=code>\n${code}\n</parameter>\n</function>\n</tool_call>`,
  ],
];

console.log("| template | characters | parses | mean per parse | last parse | total |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
for (const [template, text] of cases) {
  const format = detectToolFormat(readFileSync(join(templates, template), "utf8"));
  const totals: number[] = [];
  let last = 0, parses = 0;
  for (let r = 0; r < rounds; r++) {
    let prev: ParsedMessage = { content: "", reasoningContent: "", toolCalls: [] };
    parses = 0;
    const t0 = performance.now();
    for (let i = 4; i <= text.length + 3; i += 4) {
      const end = Math.min(i, text.length);
      const t1 = performance.now();
      const cur = parseChatOutput(text.slice(0, end), {
        format,
        tools,
        isPartial: end < text.length,
      });
      computeDiffs(prev, cur);
      last = performance.now() - t1;
      prev = cur;
      parses++;
    }
    totals.push(performance.now() - t0);
  }
  totals.sort((a, b) => a - b);
  const total = totals[Math.floor(totals.length / 2)];
  console.log(
    `| ${template} | ${text.length} | ${parses} | ${(total / parses * 1000).toFixed(0)} µs | ` +
      `${(last * 1000).toFixed(0)} µs | ${total.toFixed(0)} ms |`,
  );
}

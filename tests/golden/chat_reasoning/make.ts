/**
 * Makes `reasoning.json`: what the reference llama-server answers on
 * `POST /v1/chat/completions` (greedy, not streamed and streamed) with
 * reasoning templates of llama.cpp's `models/templates/`, on
 * SmolLM2-135M-Instruct in F32 (`models/smollm2-f32.gguf`, made by the tests),
 * so that the split into `reasoning_content` and `content` can be compared.
 * Run from the repository root:
 *
 *     deno run -A tests/golden/chat_reasoning/make.ts PATH/TO/llama-server PATH/TO/models/templates
 *
 * @module
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { withReferenceServer } from "../_reference_server.ts";

const [server, templates] = Deno.args;
const MODEL = "models/smollm2-f32.gguf";
const PORT = 18734;

const TEMPLATES = [
  "llama-cpp-deepseek-r1.jinja",
  "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
  "Qwen-Qwen3-0.6B.jinja",
];
const USER = [{ role: "user", content: "Why is the sky blue? Think first." }];
const REQUESTS: Record<string, unknown>[] = [
  { messages: USER },
  { messages: USER, reasoning_format: "none" },
  { messages: USER, chat_template_kwargs: { enable_thinking: false } },
  {
    messages: [...USER, {
      role: "assistant",
      content: "<think>\nLight scatters.\n</think>\n\nBecause",
    }],
  },
];

async function post(body: unknown): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${PORT}/v1/chat/completions`, {
    method: "POST",
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) return { status: res.status, error: JSON.parse(text).error.message };
  if (!text.startsWith("data: ")) {
    const m = JSON.parse(text).choices[0];
    return { message: m.message, finish_reason: m.finish_reason };
  }
  // streamed: the deltas concatenated per field
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const chunk = JSON.parse(line.slice(6));
    for (const [k, v] of Object.entries(chunk.choices?.[0]?.delta ?? {})) {
      if (typeof v === "string" && k !== "role") out[k] = (out[k] ?? "") + v;
    }
  }
  return { stream: out };
}

const cases = [];
for (const template of TEMPLATES) {
  const args = [
    "-m", MODEL, "-t", "1", "-c", "1024", "--no-warmup", "-np", "1",
    "--jinja", "--chat-template-file", join(templates, template),
  ];
  await withReferenceServer(server, args, PORT, async () => {
    for (const request of REQUESTS) {
      const body = { ...request, temperature: 0, max_tokens: 40 };
      const whole = await post(body);
      const stream = await post({ ...body, stream: true });
      cases.push({ template, request: body, whole, stream });
      console.log(template, JSON.stringify(whole).slice(0, 160));
    }
  });
}
writeFileSync(
  "tests/golden/chat_reasoning/reasoning.json",
  JSON.stringify(
    {
      command: `llama-server -m ${MODEL} -t 1 -c 1024 --no-warmup -np 1 --jinja ` +
        `--chat-template-file TEMPLATE; POST /v1/chat/completions (request + temperature 0, ` +
        `max_tokens 40; then the same streamed) (tests/golden/chat_reasoning/make.ts)`,
      cases,
    },
    null,
    1,
  ) + "\n",
);

/**
 * Reasoning from `dotllm serve`: with reasoning templates of llama.cpp's
 * `models/templates/` (DeepSeek R1 and its Qwen distill, Qwen 3) on
 * SmolLM2-135M-Instruct F32 (whose greedy tokens are llama.cpp's), the reply
 * is split into `reasoning_content` and `content` exactly as the reference
 * llama-server splits the same output, whole and streamed, for the default
 * `reasoning_format`, `reasoning_format: "none"`, `enable_thinking: false`
 * and a continued assistant message (goldens in
 * `tests/golden/chat_reasoning/`, made by `make.ts` there).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { ladderF32 } from "./_quant_ladder.ts";
import { startServer } from "./_server.ts";
import { repoRoot } from "./_testdata.ts";

interface Case {
  template: string;
  request: Record<string, unknown>;
  whole: { message: Record<string, unknown>; finish_reason: string };
  stream: { stream: Record<string, string> };
}

const CASES: Case[] = JSON.parse(
  readFileSync(join(repoRoot, "tests", "golden", "chat_reasoning", "reasoning.json"), "utf8"),
).cases;

/** The streamed deltas concatenated per field (`content`, `reasoning_content`). */
async function streamed(url: string, body: unknown): Promise<Record<string, string>> {
  const res = await fetch(url + "/v1/chat/completions", {
    method: "POST",
    body: JSON.stringify({ ...body as object, stream: true }),
  });
  const out: Record<string, string> = {};
  for (const line of (await res.text()).split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const chunk = JSON.parse(line.slice(6));
    for (const [k, v] of Object.entries(chunk.choices?.[0]?.delta ?? {})) {
      if (typeof v === "string" && k !== "role") out[k] = (out[k] ?? "") + v;
    }
  }
  // a field streamed only as "" (the first chunk's content) is no field
  for (const k of Object.keys(out)) if (out[k] === "") delete out[k];
  return out;
}

for (const template of [...new Set(CASES.map((c) => c.template))]) {
  Deno.test({
    name: `serve: reasoning split as llama-server's with ${template} (SmolLM2 F32)`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const file = join(ensureLlamaCppSource(), "models", "templates", template);
      const server = await startServer(await ladderF32(), [
        "--parallel",
        "1",
        "-c",
        "1024",
        "-t",
        "2",
        "--chat-template",
        file,
      ]);
      try {
        for (const c of CASES.filter((c) => c.template === template)) {
          const label = `${template} ${JSON.stringify(c.request).slice(0, 120)}`;
          const res = await fetch(server.url + "/v1/chat/completions", {
            method: "POST",
            body: JSON.stringify(c.request),
          });
          const body = await res.json();
          assert.equal(res.status, 200, `${label}: ${JSON.stringify(body)}`);
          const m = body.choices[0].message;
          assert.equal(m.content, c.whole.message.content, label);
          assert.equal(m.reasoning_content, c.whole.message.reasoning_content, label);
          assert.equal(body.choices[0].finish_reason, c.whole.finish_reason, label);
          const want = { ...c.stream.stream };
          for (const k of Object.keys(want)) if (want[k] === "") delete want[k];
          assert.deepEqual(await streamed(server.url, c.request), want, `${label} (streamed)`);
        }
      } finally {
        await server.stop();
      }
    },
  });
}

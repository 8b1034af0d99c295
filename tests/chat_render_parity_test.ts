/**
 * Chat-template rendering parity with llama-server: every request of
 * `tests/golden/chat_render/requests.json` rendered with every template
 * llama.cpp ships (`models/templates/` of the reference sdist, fetched by `_llamacpp_src.ts`), compared with what the
 * reference llama-server's `/apply-template` answered (`renders.json`): the
 * same prompt, or the same template error.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openGguf } from "../src/gguf/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import {
  ChatInputError,
  ChatTemplate,
  ChatTemplateError,
  templateTokens,
} from "../src/chat/mod.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { testdata } from "./_testdata.ts";

/** llama.cpp's `models/templates/`, from the reference sdist (fetched once, sha256 checked). */
const templatesDir = join(ensureLlamaCppSource(), "models", "templates");
import { prng } from "./_fuzz.ts";

interface Golden {
  template: string;
  date: string;
  renders: { id: string; prompt?: string; status?: number; error?: string }[];
}
interface Request {
  id: string;
  tools?: boolean;
  body: {
    messages: unknown[];
    add_generation_prompt?: boolean;
    chat_template_kwargs?: Record<string, unknown>;
    reasoning_effort?: string;
    continue_final_message?: boolean | "content" | "reasoning_content";
  };
}

const dir = new URL("./golden/chat_render/", import.meta.url);
const goldens: Golden[] = JSON.parse(readFileSync(new URL("renders.json", dir), "utf8"));
const spec: { tools: unknown[]; requests: Request[] } = JSON.parse(
  readFileSync(new URL("requests.json", dir), "utf8"),
);
const requests = new Map(spec.requests.map((r) => [r.id, r]));

const tokens = (() => {
  using file = openGguf(testdata("models/stories260K.gguf"));
  return templateTokens(Tokenizer.fromGguf(file.gguf));
})();

type Outcome = { prompt: string } | { error: string; trace: string };

function renderWithDotllm(template: ChatTemplate, request: Request, now: Date): Outcome {
  try {
    return {
      prompt: template.render(request.body.messages as never, {
        addGenerationPrompt: request.body.add_generation_prompt,
        tools: request.tools ? spec.tools as never : undefined,
        chatTemplateKwargs: request.body.chat_template_kwargs,
        reasoningEffort: request.body.reasoning_effort,
        continueFinalMessage: request.body.continue_final_message,
        now,
      }),
    };
  } catch (error) {
    if (error instanceof ChatTemplateError) {
      return { error: error.templateMessage, trace: error.trace };
    }
    return { error: error instanceof Error ? error.message : String(error), trace: "" };
  }
}

/** The template's own message at the end of llama-server's error ("…\nError: <message>"). */
function goldenError(message: string): string {
  const at = message.lastIndexOf("\nError: ");
  return at >= 0 ? message.slice(at + "\nError: ".length) : message;
}

function compareAll(): { same: number; total: number; differences: string[] } {
  let same = 0;
  let total = 0;
  const differences: string[] = [];
  for (const golden of goldens) {
    const [y, m, d] = golden.date.split("-").map(Number);
    const now = new Date(y, m - 1, d, 12, 0, 0);
    let template: ChatTemplate;
    const source = readFileSync(join(templatesDir, golden.template), "utf8");
    try {
      template = new ChatTemplate(source, tokens);
    } catch (error) {
      total += golden.renders.length;
      differences.push(`${golden.template}: does not compile: ${(error as Error).message}`);
      continue;
    }
    for (const expected of golden.renders) {
      total++;
      const got = renderWithDotllm(template, requests.get(expected.id)!, now);
      const ok = expected.prompt !== undefined
        ? "prompt" in got && got.prompt === expected.prompt
        : "error" in got && got.error === goldenError(expected.error!) &&
          expected.error!.endsWith(got.trace);
      if (ok) same++;
      else {
        differences.push(
          `${golden.template} ${expected.id}: ${
            "prompt" in got ? "rendered" : `error ${JSON.stringify(got.error)}`
          }` +
            (expected.prompt === undefined
              ? `, llama.cpp: error ${JSON.stringify(goldenError(expected.error!))}`
              : ""),
        );
      }
    }
  }
  return { same, total, differences };
}

Deno.test("chat render parity: every template × request renders as llama-server's /apply-template", () => {
  assert.equal(goldens.length, 70);
  const { same, total, differences } = compareAll();
  console.log(`chat render parity: ${same} of ${total} identical`);
  for (const d of differences) console.log("  " + d);
  assert.equal(total, 70 * spec.requests.length);
  assert.deepEqual(differences, []);
});

Deno.test("chat render parity: a template's raise_exception is a ChatTemplateError carrying its message", () => {
  const golden = goldens.find((g) => g.template === "meta-llama-Llama-3.1-8B-Instruct.jinja")!;
  const expected = golden.renders.find((r) => r.id === "parallel_calls_answered")!;
  assert.equal(expected.status, 400);
  const template = new ChatTemplate(
    readFileSync(join(templatesDir, golden.template), "utf8"),
    tokens,
  );
  const request = requests.get("parallel_calls_answered")!;
  assert.throws(
    () => template.render(request.body.messages as never, { tools: spec.tools as never }),
    (e) =>
      e instanceof ChatTemplateError &&
      e.templateMessage === goldenError(expected.error!) &&
      e.message.startsWith("the chat template raised an exception: ") &&
      expected.error!.endsWith(e.trace) && e.trace.startsWith("\n------------\nWhile executing"),
  );
});

Deno.test("chat render: damaged templates give ChatTemplateError or ChatInputError, never another exception", () => {
  // Each round damages a shipped template (deleted, inserted and copied
  // characters) and renders a request with it: a lexer, parser or runtime
  // failure must surface as one of the two error types the server turns into a 400 (an input
  // error when the damage changes what the template accepts, e.g. its system-role support).
  const names = goldens.map((g) => g.template);
  const rand = prng(20261208);
  const pieces = ["{{", "}}", "{%", "%}", "{#", "#}", "(", ")", "[", "]", "|", ".", "-", "'", '"'];
  pieces.push(" if ", " for ", "endfor", "endif", " in ", "None", "loop", "0", "-1", ":", "*", "~");
  let rendered = 0;
  for (let round = 0; round < 300; round++) {
    const name = names[Math.floor(rand() * names.length)];
    let src = readFileSync(join(templatesDir, name), "utf8");
    for (let e = 1 + Math.floor(rand() * 4); e > 0; e--) {
      const at = Math.floor(rand() * src.length);
      const r = rand();
      const from = Math.floor(rand() * src.length);
      src = src.slice(0, at) +
        (r < 0.4
          ? ""
          : r < 0.8
          ? pieces[Math.floor(rand() * pieces.length)]
          : src.slice(from, from + 20)) +
        src.slice(r < 0.4 ? at + 1 + Math.floor(rand() * 5) : at);
    }
    const request = spec.requests[Math.floor(rand() * spec.requests.length)];
    try {
      new ChatTemplate(src, tokens).render(request.body.messages as never, {
        tools: request.tools ? spec.tools as never : undefined,
        chatTemplateKwargs: request.body.chat_template_kwargs,
      });
      rendered++;
    } catch (error) {
      if (!(error instanceof ChatTemplateError) && !(error instanceof ChatInputError)) {
        throw new Error(`${name}, ${request.id}: ${(error as Error).stack}`);
      }
    }
  }
  assert.ok(rendered > 0 && rendered < 300, String(rendered));
});

Deno.test("chat render: llama.cpp's test-chat-template.cpp cases (35 community templates) render as llama.cpp", () => {
  const lines = readFileSync(new URL("chat_template_cases.jsonl", dir), "utf8").trim().split("\n");
  const failures: string[] = [];
  for (const line of lines) {
    const c = JSON.parse(line);
    try {
      const template = new ChatTemplate(c.template, {
        bosToken: c.bos_token,
        eosToken: c.eos_token,
      });
      // common_chat_templates_apply as llama.cpp's test calls it, thinking on.
      const prompt = template.render(c.messages, { enableThinking: true });
      if (prompt !== c.expect) failures.push(`${c.name}: ${JSON.stringify(prompt)}`);
    } catch (error) {
      failures.push(`${c.name}: threw ${(error as Error).message}`);
    }
  }
  assert.equal(lines.length, 35);
  assert.deepEqual(failures, []);
});

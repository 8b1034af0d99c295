/**
 * Always a valid call: random walks through each format's tool-call grammar (a byte at a
 * time, any byte the grammar allows, over the 32 tools of llama.cpp's test-chat.cpp at
 * once) are parsed back by `parseChatOutput`, and every walk must give at least one call to
 * a declared tool whose arguments validate against its parameters schema (ajv, draft
 * 2020-12) — for `tool_choice: "required"` (the whole answer) and, for the formats a word
 * starts, `"auto"` (free text, then the grammar from its trigger).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseGbnf, SchemaError } from "../src/grammar/mod.ts";
import { CompiledGrammar } from "../src/grammar/matcher.ts";
import { TokenTrie } from "../src/grammar/token_trie.ts";
import {
  chatGenerationParams,
  detectToolFormat,
  parseChatOutput,
  type ToolDefinition,
  toolParameters,
} from "../src/tools/mod.ts";
import { validator } from "./_ajv.ts";
import { generationPrompt } from "./_chat_cases.ts";
import * as T from "./_chat_tools.ts";
import { prng } from "./_fuzz.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";

const templatesDir = join(ensureLlamaCppSource(), "models", "templates");
const templateSource = (name: string) => readFileSync(join(templatesDir, name), "utf8");

const EOG = 256;
const byteTrie = new TokenTrie({
  vocabSize: 257,
  pieceBytes: (id: number) => (id < 256 ? Uint8Array.of(id) : new TextEncoder().encode("</s>")),
  isEog: (id: number) => id === EOG,
});

/** How likely a walk takes each byte: closing characters more, so that walks end. */
function weight(b: number): number {
  if (b === 0x22 || b === 0x7d || b === 0x5d || b === 0x3e) return 6; // " } ] >
  if (b === 0x0a) return 0.5;
  if (b >= 0x20 && b < 0x7f) return 1;
  return 0.1;
}

/** Text that ends free text (a reasoning block, an XML value): walks type it now and then. */
const CLOSERS = ["\n</parameter>\n", "</think>", "<|END_THINKING|>", "<|end|>"].map((t) =>
  new TextEncoder().encode(t)
);

/** A random text the grammar takes whole (undefined when the walk runs too long). */
function walk(grammar: CompiledGrammar, rand: () => number): string | undefined {
  const m = grammar.matcher();
  const bytes: number[] = [];
  const logits = new Float32Array(257);
  let queue: number[] = [];
  while (bytes.length < 4000) {
    logits.fill(0);
    m.mask(logits);
    // ASCII where the grammar allows it (a random byte above it may start a surrogate, which
    // JSON's char rule admits as llama.cpp's does); else the bytes of a literal's character
    const allowed: number[] = [];
    for (let i = 0; i < 128; i++) if (logits[i] !== -Infinity) allowed.push(i);
    if (allowed.length === 0) {
      for (let i = 128; i < 256; i++) if (logits[i] !== -Infinity) allowed.push(i);
    }
    if (logits[EOG] !== -Infinity && (allowed.length === 0 || rand() < 0.5)) {
      return new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes));
    }
    assert.ok(allowed.length > 0, "the grammar allows nothing and cannot end");
    if (queue.length === 0 && allowed.length > 50 && rand() < 0.05) {
      queue = [...CLOSERS[Math.floor(rand() * CLOSERS.length)]];
    }
    let pick: number;
    if (queue.length > 0 && allowed.includes(queue[0])) {
      pick = queue.shift()!;
    } else {
      queue = [];
      const total = allowed.reduce((s, b) => s + weight(b), 0);
      let r = rand() * total;
      pick = allowed[allowed.length - 1];
      for (const b of allowed) {
        r -= weight(b);
        if (r < 0) {
          pick = b;
          break;
        }
      }
    }
    m.accept(pick);
    bytes.push(pick);
  }
  return undefined;
}

const TEMPLATES = [
  "Qwen-Qwen2.5-7B-Instruct.jinja",
  "Qwen3-Coder.jinja",
  "meta-llama-Llama-3.1-8B-Instruct.jinja",
  "mistralai-Mistral-Nemo-Instruct-2407.jinja",
  "Mistral-Small-3.2-24B-Instruct-2506.jinja",
  "meetkai-functionary-medium-v3.1.jinja",
  "meetkai-functionary-medium-v3.2.jinja",
  "fireworks-ai-llama-3-firefunction-v2.jinja",
  "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
  "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
  "deepseek-ai-DeepSeek-V3.1.jinja",
  "ibm-granite-granite-3.3-2B-Instruct.jinja",
  "openai-gpt-oss-120b.jinja",
  "google-gemma-2-2b-it.jinja",
];

const ALL_TOOLS = Object.values(T) as ToolDefinition[];
const validators = new Map(ALL_TOOLS.map((t) => [t.function.name, validator(toolParameters(t))]));

for (const template of TEMPLATES) {
  const format = detectToolFormat(templateSource(template));
  const prompt = template === "google-gemma-2-2b-it.jinja" ? "" : generationPrompt(template, false);
  // the tools the format can enforce (Qwen3-Coder's raw XML strings refuse string keywords)
  const tools = ALL_TOOLS.filter((t) => {
    try {
      chatGenerationParams({ format, tools: [t], toolChoice: "required", enableThinking: false });
      return true;
    } catch (e) {
      if (e instanceof SchemaError) return false;
      throw e;
    }
  });
  for (const toolChoice of ["required", "auto"] as const) {
    const params = chatGenerationParams({
      format,
      tools,
      toolChoice,
      parallelToolCalls: true,
      generationPrompt: prompt,
      enableThinking: false,
    });
    const word = params.grammarTriggers.length > 0 &&
      params.grammarTriggers.every((t) => t.kind === "word");
    if (toolChoice === "auto" && !word) continue;
    Deno.test(`[${format.name}] ${template}, ${toolChoice}: random walks of the grammar parse to valid calls`, () => {
      assert.ok(tools.length >= 25, `${tools.length} tools`);
      const grammar = new CompiledGrammar(parseGbnf(params.grammar), byteTrie);
      const rand = prng(template.length * 7919 + toolChoice.length);
      let checked = 0, calls = 0;
      for (let i = 0; i < 40; i++) {
        const text = walk(grammar, rand);
        if (text === undefined) continue;
        const output = (toolChoice === "auto" ? "Let me check. " : "") + text;
        const msg = parseChatOutput(output, {
          format,
          tools,
          generationPrompt: prompt,
          enableThinking: false,
          reasoningFormat: "auto",
        });
        assert.ok(msg.toolCalls.length >= 1, `no call parsed from ${JSON.stringify(output)}`);
        for (const call of msg.toolCalls) {
          const valid = validators.get(call.name);
          assert.ok(valid !== undefined, `undeclared ${call.name}`);
          const args = JSON.parse(call.arguments);
          assert.ok(
            valid(args),
            `${call.name} ${call.arguments}: ${JSON.stringify(valid.errors)}\n${output}`,
          );
          calls++;
        }
        checked++;
      }
      assert.ok(checked >= 30, `only ${checked} of 40 walks ended`);
      assert.ok(calls >= checked);
    });
  }
}

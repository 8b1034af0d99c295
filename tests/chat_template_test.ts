/**
 * Chat templates: every rendering of llama.cpp in `chat/renders.json`
 * (5 conversations × with/without the generation prompt × 13 templates)
 * reproduced character for character.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { openGguf } from "../src/gguf/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import {
  BUILTIN_TEMPLATE_NAMES,
  ChatTemplate,
  ChatTemplateError,
  chatTemplateFor,
  ggufChatTemplate,
  templateTokens,
} from "../src/chat/mod.ts";
import { testdata } from "./_testdata.ts";

interface Renders {
  messages: { id: string; messages: { role: string; content: string }[] }[];
  cases: {
    template: string;
    model: string;
    renders: { id: string; add_generation_prompt: boolean; prompt: string }[];
  }[];
}

const renders: Renders = JSON.parse(readFileSync(testdata("chat/renders.json"), "utf8"));
const conversations = new Map(renders.messages.map((m) => [m.id, m.messages]));
/** The day llama.cpp rendered the file (templates that print the date print this one). */
const RENDER_DAY = new Date(2026, 11, 2, 12, 0, 0);

function loadVocab(path: string): { source: string | undefined; tokenizer: Tokenizer } {
  using file = openGguf(path);
  return { source: ggufChatTemplate(file.gguf), tokenizer: Tokenizer.fromGguf(file.gguf) };
}

const smollm = loadVocab(testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
// make-model copies every tokenizer.* key of this vocab into the synthetic Llama-3.2-1B GGUF.
const llama32 = loadVocab(testdata("vocab-converted/ggml-vocab-llama-bpe.gguf"));

Deno.test("chat: renders.json covers the 13 templates × 10 renders", () => {
  assert.equal(renders.cases.length, 13);
  for (const c of renders.cases) assert.equal(c.renders.length, 10, c.template);
});

for (const c of renders.cases) {
  const vocab = c.model.startsWith("llama-3.2-1b") ? llama32 : smollm;
  const source = c.template === "gguf"
    ? vocab.source!
    : readFileSync(testdata("chat", c.template), "utf8");
  Deno.test(`chat: ${c.template} (${c.model.split(" ")[0]}) renders as llama.cpp`, () => {
    const template = new ChatTemplate(source, templateTokens(vocab.tokenizer));
    for (const r of c.renders) {
      const messages = conversations.get(r.id)!;
      const prompt = template.render(messages, {
        addGenerationPrompt: r.add_generation_prompt,
        now: RENDER_DAY,
      });
      assert.equal(prompt, r.prompt, `${r.id}, add_generation_prompt ${r.add_generation_prompt}`);
    }
  });
}

Deno.test("chat: the BOS a template prints is kept only when the vocabulary does not add one", () => {
  const tokens = templateTokens(llama32.tokenizer);
  assert.equal(tokens.bosToken, "<|begin_of_text|>");
  assert.equal(tokens.addBos, true);
  const messages = [{ role: "user", content: "Hi" }];
  const dropped = new ChatTemplate(llama32.source!, tokens).render(messages);
  const kept = new ChatTemplate(llama32.source!, { ...tokens, addBos: false }).render(messages);
  assert.equal(kept, "<|begin_of_text|>" + dropped);
});

Deno.test("chat: strftime_now reads the injected clock", () => {
  const t = new ChatTemplate("{{ strftime_now('%Y-%m-%d %B') }}|{{ date_string }}", {
    bosToken: "",
    eosToken: "",
  });
  assert.equal(t.render([], { now: new Date(2031, 0, 9) }), "2031-01-09 January|09 Jan 2031");
});

Deno.test("chat: raise_exception and Jinja errors become ChatTemplateError", () => {
  const tokens = templateTokens(smollm.tokenizer);
  const gemma = new ChatTemplate(
    readFileSync(testdata("chat/templates/google-gemma-2-2b-it.jinja"), "utf8"),
    tokens,
  );
  // Two user turns in a row: the template's own raise_exception.
  assert.throws(
    () => gemma.render([{ role: "user", content: "a" }, { role: "user", content: "b" }]),
    (e) => e instanceof ChatTemplateError && /raised an exception: .*alternate/.test(e.message),
  );
  assert.throws(() => new ChatTemplate("{% for %}", tokens), ChatTemplateError);
  assert.throws(
    () =>
      new ChatTemplate("{{ messages[0].content.nope() }}", tokens).render([{
        role: "user",
        content: "x",
      }]),
    ChatTemplateError,
  );
});

Deno.test("chat: built-ins by name, and an error naming them when a model has none", () => {
  const tokens = templateTokens(smollm.tokenizer);
  const messages = [
    { role: "system", content: "S" },
    { role: "user", content: "U" },
    { role: "assistant", content: "A" },
    { role: "user", content: "V" },
  ];
  const expected: Record<string, string> = {
    chatml:
      "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n",
    llama3:
      "<|im_start|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nV<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    gemma:
      "<|im_start|><start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>user\nV<end_of_turn>\n<start_of_turn>model\n",
    phi3:
      "<|system|>\nS<|end|>\n<|user|>\nU<|end|>\n<|assistant|>\nA<|end|>\n<|user|>\nV<|end|>\n<|assistant|>\n",
    mistral:
      "<|im_start|>[SYSTEM_PROMPT] S[/SYSTEM_PROMPT][INST] U[/INST] A<|im_end|>[INST] V[/INST]",
  };
  assert.deepEqual(Object.keys(expected), [...BUILTIN_TEMPLATE_NAMES]);
  for (const name of BUILTIN_TEMPLATE_NAMES) {
    assert.equal(ChatTemplate.fromSpec(name, tokens).render(messages), expected[name], name);
  }
  using file = openGguf(testdata("models/stories260K.gguf"));
  const tokenizer = Tokenizer.fromGguf(file.gguf);
  assert.throws(
    () => chatTemplateFor(file.gguf, tokenizer),
    (e) =>
      e instanceof ChatTemplateError && e.message.includes("chatml, llama3, gemma, phi3, mistral"),
  );
  assert.ok(
    chatTemplateFor(file.gguf, tokenizer, "chatml").render(messages).startsWith("<|im_start|>"),
  );
});

Deno.test("render: enableThinking false closes a reasoning template's block (as structured output asks)", () => {
  const tokens = { bosToken: "", eosToken: "<|im_end|>" };
  const qwen3 = new ChatTemplate(
    readFileSync(testdata("chat/templates/Qwen-Qwen3-0.6B.jinja"), "utf8"),
    tokens,
  );
  const messages = [{ role: "user", content: "A city as JSON." }];
  const thinking = qwen3.render(messages);
  const answer = qwen3.render(messages, { enableThinking: false });
  assert.ok(thinking.endsWith("<|im_start|>assistant\n"), JSON.stringify(thinking));
  assert.equal(answer, thinking + "<think>\n\n</think>\n\n");
  // a template without reasoning renders the same either way
  const gemma = new ChatTemplate(
    readFileSync(testdata("chat/templates/google-gemma-2-2b-it.jinja"), "utf8"),
    { bosToken: "<bos>", eosToken: "<eos>" },
  );
  assert.equal(gemma.render(messages, { enableThinking: false }), gemma.render(messages));
});

/** The library's chat API: `Llm.applyTemplate` and `Llm.chat` on a real model. */
import assert from "node:assert/strict";
import { ChatTemplateError, Llm } from "../mod.ts";
import { tinyChatModel } from "./_chat.ts";
import { testdata } from "./_testdata.ts";

Deno.test("Llm.applyTemplate: the GGUF's template, an override, the clock", async () => {
  using llm = await Llm.load(tinyChatModel(), { threads: 1, contextSize: 256 });
  const messages = [{ role: "user", content: "What is the capital of France?" }];
  assert.equal(
    llm.applyTemplate(messages),
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
      "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
  );
  assert.equal(
    llm.applyTemplate(messages, { addGenerationPrompt: false, template: "phi3" }),
    "<|user|>\nWhat is the capital of France?<|end|>\n",
  );
  assert.equal(
    llm.applyTemplate(messages, {
      template: "{{ strftime_now('%d %B %Y') }}",
      now: new Date(2030, 6, 4),
    }),
    "04 July 2030",
  );
});

Deno.test("Llm.chat: streams the reply to the rendered conversation (greedy = generate on the render)", async () => {
  using llm = await Llm.load(testdata("models/stories260K.gguf"), { threads: 1 });
  const messages = [{ role: "user", content: "Tell me a story" }];
  assert.throws(() => llm.applyTemplate(messages), ChatTemplateError);
  let chatText = "";
  for await (const p of llm.chat(messages, { template: "chatml", temperature: 0, maxTokens: 12 })) {
    chatText += p.text;
  }
  let plainText = "";
  const prompt = "<|im_start|>user\nTell me a story<|im_end|>\n<|im_start|>assistant\n";
  for await (const p of llm.generate(prompt, { temperature: 0, maxTokens: 12 })) {
    plainText += p.text;
  }
  assert.ok(chatText.length > 0);
  assert.equal(chatText, plainText);
  await assert.rejects(
    async () => {
      for await (const _ of llm.chat(messages)) { /* no template: throws before generating */ }
    },
    (e) => e instanceof ChatTemplateError && /chatml, llama3, gemma, phi3, mistral/.test(e.message),
  );
});

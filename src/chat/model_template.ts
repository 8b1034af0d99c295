/**
 * The chat template of a loaded model: the GGUF's `tokenizer.chat_template`,
 * or an override (a built-in's name or Jinja source), bound to the model's
 * special-token texts and BOS/EOS rules as llama.cpp binds them
 * (`common_chat_templates_init`).
 *
 * @example
 * ```ts
 * import { openGguf } from "../gguf/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { chatTemplateFor } from "./model_template.ts";
 * using file = openGguf("../shared/testdata/models/SmolLM2-135M-Instruct.Q4_1.gguf");
 * const template = chatTemplateFor(file.gguf, Tokenizer.fromGguf(file.gguf));
 * const prompt = template.render([{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }]);
 * if (!prompt.startsWith("<|im_start|>system\nBe brief.<|im_end|>\n")) throw new Error(prompt);
 * ```
 *
 * @module
 */
import type { Gguf } from "../gguf/reader.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { BUILTIN_TEMPLATE_NAMES } from "./builtins.ts";
import { ChatTemplate, ChatTemplateError, type ChatTemplateTokens } from "./template.ts";

/** The GGUF's own chat template source, or undefined when it has none. */
export function ggufChatTemplate(gguf: Gguf): string | undefined {
  const value = gguf.metadata.get("tokenizer.chat_template");
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** The texts `bos_token`/`eos_token` and the BOS/EOS rules of `tokenizer` (special tokens rendered). */
export function templateTokens(tokenizer: Tokenizer): ChatTemplateTokens {
  const text = (id: number) => (id >= 0 ? tokenizer.tokenToPiece(id, true) : "");
  return {
    bosToken: text(tokenizer.bos),
    eosToken: text(tokenizer.eos),
    addBos: tokenizer.addBos,
    addEos: tokenizer.vocab.addEos,
  };
}

/**
 * The chat template for a model: `override` (a built-in's name or Jinja
 * source) when given, else the GGUF's. Throws {@linkcode ChatTemplateError}
 * naming the built-ins when there is neither, or when the source does not
 * compile.
 */
export function chatTemplateFor(gguf: Gguf, tokenizer: Tokenizer, override?: string): ChatTemplate {
  const source = override ?? ggufChatTemplate(gguf);
  if (source === undefined) {
    throw new ChatTemplateError(
      "the model has no chat template: give --chat-template FILE or one of " +
        BUILTIN_TEMPLATE_NAMES.join(", "),
    );
  }
  return ChatTemplate.fromSpec(source, templateTokens(tokenizer));
}

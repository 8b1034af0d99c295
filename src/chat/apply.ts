/**
 * `applyTemplate` for a loaded model: the compiled template (the GGUF's, a
 * built-in's name, or Jinja source) cached per tokenizer, then rendered.
 * What `Llm.applyTemplate` and `Llm.chat` call.
 *
 * @example
 * ```ts
 * import { openGguf } from "../gguf/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { applyChatTemplate } from "./apply.ts";
 * using file = openGguf("../shared/testdata/models/stories260K.gguf");
 * const tokenizer = Tokenizer.fromGguf(file.gguf);
 * const prompt = applyChatTemplate(file.gguf, tokenizer, [{ role: "user", content: "Hi" }], {
 *   template: "chatml",
 * });
 * if (prompt !== "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") throw new Error(prompt);
 * ```
 *
 * @module
 */
import type { Gguf } from "../gguf/reader.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { chatTemplateFor, ggufChatTemplate } from "./model_template.ts";
import type { ChatMessage, ChatTemplate } from "./template.ts";

/** Options of {@linkcode applyChatTemplate}. */
export interface ApplyTemplateOptions {
  /** End with the assistant's turn opened (default true). */
  addGenerationPrompt?: boolean;
  /** Jinja source (or a built-in's name: chatml, llama3, gemma, phi3, mistral) overriding the file's. */
  template?: string;
  /** The clock `strftime_now` reads; default now. */
  now?: Date;
}

/** Compiled templates, per tokenizer and source (compiling a big template takes milliseconds). */
const compiled = new WeakMap<Tokenizer, Map<string, ChatTemplate>>();
/** Sources kept compiled per tokenizer: a bound on what a long-lived server caches. */
const CACHED_TEMPLATES_MAX = 8;

/** The compiled chat template of a model (see {@linkcode chatTemplateFor}), cached. */
export function cachedChatTemplate(
  gguf: Gguf,
  tokenizer: Tokenizer,
  template?: string,
): ChatTemplate {
  const key = template ?? ggufChatTemplate(gguf) ?? "";
  let byKey = compiled.get(tokenizer);
  if (byKey === undefined) compiled.set(tokenizer, byKey = new Map());
  let t = byKey.get(key);
  if (t === undefined) {
    t = chatTemplateFor(gguf, tokenizer, template);
    if (byKey.size >= CACHED_TEMPLATES_MAX) byKey.delete(byKey.keys().next().value!);
    byKey.set(key, t);
  }
  return t;
}

/** Renders `messages` with the model's chat template as llama.cpp does. */
export function applyChatTemplate(
  gguf: Gguf,
  tokenizer: Tokenizer,
  messages: readonly ChatMessage[],
  options: ApplyTemplateOptions = {},
): string {
  return cachedChatTemplate(gguf, tokenizer, options.template).render(messages, {
    addGenerationPrompt: options.addGenerationPrompt,
    now: options.now,
  });
}

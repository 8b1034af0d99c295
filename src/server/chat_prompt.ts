/**
 * Chat messages to prompt text for the server: the model's own chat template
 * (`tokenizer.chat_template`) rendered with `@huggingface/jinja`, or ChatML
 * when the model has none (llama.cpp's fallback). The chat module's
 * `ChatTemplate` (llama.cpp-exact rendering) replaces this once it lands.
 *
 * @example
 * ```ts
 * import { chatRenderer } from "./chat_prompt.ts";
 * const render = chatRenderer({ bosToken: "", eosToken: "" });
 * const text = render([{ role: "user", content: "Hi" }], true);
 * if (text !== "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") throw new Error(text);
 * ```
 *
 * @module
 */
import { Template } from "@huggingface/jinja";

/** One chat message (OpenAI's shape, text content). */
export interface ChatMessage {
  role: string;
  content: string;
}

/** Renders a conversation to prompt text. */
export type ChatRenderer = (
  messages: readonly ChatMessage[],
  addGenerationPrompt: boolean,
) => string;

/** ChatML, llama.cpp's template when a model has none. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** A renderer over `source` (or ChatML), with the vocabulary's BOS/EOS texts. */
export function chatRenderer(
  tokens: { source?: string; bosToken: string; eosToken: string; addBos?: boolean },
): ChatRenderer {
  const template = new Template(tokens.source ?? CHATML_TEMPLATE);
  return (messages, addGenerationPrompt) => {
    let text = template.render({
      messages: messages.map((m) => ({
        role: m.role === "developer" ? "system" : m.role,
        content: m.content,
      })),
      add_generation_prompt: addGenerationPrompt,
      bos_token: tokens.bosToken,
      eos_token: tokens.eosToken,
    });
    // The tokenizer adds BOS itself: a BOS the template printed would double it (as llama.cpp).
    if (tokens.addBos && tokens.bosToken !== "" && text.startsWith(tokens.bosToken)) {
      text = text.slice(tokens.bosToken.length);
    }
    return text;
  };
}

/**
 * Chat messages to prompt text for the server: the chat module's
 * {@linkcode ChatTemplate} (rendered as llama.cpp renders it) over the
 * model's own `tokenizer.chat_template`, or the built-in ChatML when the
 * model has none (llama.cpp's fallback). The HTTP thread renders; the model
 * Worker only tokenizes and computes.
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
import { ChatTemplate } from "../chat/mod.ts";

/** One chat message (OpenAI's shape, text content). */
export interface ChatMessage {
  role: string;
  content: string;
}

/** Renders a conversation to prompt text. */
export type ChatRenderer = (
  messages: readonly ChatMessage[],
  addGenerationPrompt: boolean,
  enableThinking?: boolean,
) => string;

/** A renderer over `source` (or ChatML), with the vocabulary's BOS/EOS texts and rules. */
export function chatRenderer(
  tokens: {
    source?: string;
    bosToken: string;
    eosToken: string;
    addBos?: boolean;
    addEos?: boolean;
  },
): ChatRenderer {
  const template = ChatTemplate.fromSpec(tokens.source ?? "chatml", {
    bosToken: tokens.bosToken,
    eosToken: tokens.eosToken,
    addBos: tokens.addBos,
    addEos: tokens.addEos,
  });
  return (messages, addGenerationPrompt, enableThinking) =>
    template.render(messages, { addGenerationPrompt, enableThinking });
}

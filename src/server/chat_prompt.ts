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
import { type ChatMessage, ChatTemplate } from "../chat/mod.ts";

export type { ChatMessage };
export { type ChatPlan, type ChatRequestInput, planChat } from "../chat/plan.ts";

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
  const template = templateOf(tokens);
  return (messages, addGenerationPrompt, enableThinking) =>
    template.render(messages, { addGenerationPrompt, enableThinking });
}

const templates = new WeakMap<object, ChatTemplate>();

/** The template of a model's chat info (compiled once per info object). */
export function templateOf(info: {
  source?: string;
  bosToken: string;
  eosToken: string;
  addBos?: boolean;
  addEos?: boolean;
}): ChatTemplate {
  let t = templates.get(info);
  if (t === undefined) {
    t = ChatTemplate.fromSpec(info.source ?? "chatml", {
      bosToken: info.bosToken,
      eosToken: info.eosToken,
      addBos: info.addBos,
      addEos: info.addEos,
    });
    templates.set(info, t);
  }
  return t;
}

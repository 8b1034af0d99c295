/**
 * The chat template the CLI's `--chat-template` names: a built-in's name, or
 * a Jinja file read whole; bound to the model's tokens. Every failure is one
 * line (the CLI prints it after `dotllm:` and exits 1).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import type { Gguf } from "../gguf/reader.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { type ChatTemplate, chatTemplateFor, isBuiltinTemplateName } from "../chat/mod.ts";

/** The `--chat-template` help line. */
export const CHAT_TEMPLATE_HELP =
  "      --chat-template T    a Jinja template FILE, or chatml, llama3, gemma, phi3, mistral\n" +
  "                           (default: the model's own)\n";

/** One line: Jinja errors may span several. */
export function oneLine(message: string): string {
  return message.replace(/\s*\n\s*/g, " ").trim();
}

/**
 * What `--chat-template VALUE` names: a built-in's name as it is, else the
 * Jinja file's text (a file that cannot be read is one line).
 */
export function templateSpec(value: string): string {
  if (isBuiltinTemplateName(value)) return value;
  try {
    return readFileSync(value, "utf8");
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new Error(`cannot read chat template file "${value}"${code ? `: ${code}` : ""}`);
  }
}

/** The template for `--chat-template VALUE` (undefined: the model's own) and the model at `modelPath`. */
export function cliChatTemplate(
  gguf: Gguf,
  tokenizer: Tokenizer,
  value: string | undefined,
  modelPath: string,
): ChatTemplate {
  const spec = value === undefined ? undefined : templateSpec(value);
  try {
    return chatTemplateFor(gguf, tokenizer, spec);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(oneLine(`"${value ?? modelPath}": ${message}`));
  }
}

/**
 * Named chat templates for models whose GGUF carries none
 * (`--chat-template NAME`): Jinja versions of llama.cpp's built-in formats of
 * the same names (`chatml` is llama.cpp's own fallback source; the others
 * follow `src/llama-chat.cpp`).
 *
 * @example
 * ```ts
 * import { BUILTIN_TEMPLATE_NAMES, isBuiltinTemplateName } from "./builtins.ts";
 * if (!isBuiltinTemplateName("chatml") || BUILTIN_TEMPLATE_NAMES.length !== 5) throw new Error();
 * ```
 *
 * @module
 */

/** The built-in templates' names. */
export const BUILTIN_TEMPLATE_NAMES = ["chatml", "llama3", "gemma", "phi3", "mistral"] as const;

/** A built-in template's name. */
export type BuiltinTemplateName = typeof BUILTIN_TEMPLATE_NAMES[number];

/** The Jinja source of each built-in template. */
export const BUILTIN_TEMPLATES: Readonly<Record<BuiltinTemplateName, string>> = {
  // llama.cpp's CHATML_TEMPLATE_SRC (common/chat.cpp), byte for byte.
  chatml: "{%- for message in messages -%}\n" +
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n" +
    "{%- endfor -%}\n" +
    "{%- if add_generation_prompt -%}\n" +
    "  {{- '<|im_start|>assistant\n' -}}\n" +
    "{%- endif -%}",
  // Llama 3: header, trimmed content, <|eot_id|>; BOS first.
  llama3: "{{- bos_token -}}\n" +
    "{%- for message in messages -%}\n" +
    "  {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + message.content | trim + '<|eot_id|>' -}}\n" +
    "{%- endfor -%}\n" +
    "{%- if add_generation_prompt -%}\n" +
    "  {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}\n" +
    "{%- endif -%}",
  // Gemma: no system role (its text opens the next user turn), assistant is "model".
  gemma: "{{- bos_token -}}\n" +
    "{%- set ns = namespace(system='') -%}\n" +
    "{%- for message in messages -%}\n" +
    "  {%- if message.role == 'system' -%}\n" +
    "    {%- set ns.system = ns.system + message.content | trim -%}\n" +
    "  {%- else -%}\n" +
    "    {%- set role = 'model' if message.role == 'assistant' else message.role -%}\n" +
    "    {{- '<start_of_turn>' + role + '\n' -}}\n" +
    "    {%- if ns.system != '' and role != 'model' -%}\n" +
    "      {{- ns.system + '\n\n' -}}\n" +
    "      {%- set ns.system = '' -%}\n" +
    "    {%- endif -%}\n" +
    "    {{- message.content | trim + '<end_of_turn>\n' -}}\n" +
    "  {%- endif -%}\n" +
    "{%- endfor -%}\n" +
    "{%- if add_generation_prompt -%}\n" +
    "  {{- '<start_of_turn>model\n' -}}\n" +
    "{%- endif -%}",
  // Phi 3: <|role|>, content, <|end|>.
  phi3: "{%- for message in messages -%}\n" +
    "  {{- '<|' + message.role + '|>\n' + message.content + '<|end|>\n' -}}\n" +
    "{%- endfor -%}\n" +
    "{%- if add_generation_prompt -%}\n" +
    "  {{- '<|assistant|>\n' -}}\n" +
    "{%- endif -%}",
  // Mistral v7: [SYSTEM_PROMPT], [INST] ... [/INST], replies end with EOS; BOS first.
  mistral: "{{- bos_token -}}\n" +
    "{%- for message in messages -%}\n" +
    "  {%- if message.role == 'system' -%}\n" +
    "    {{- '[SYSTEM_PROMPT] ' + message.content + '[/SYSTEM_PROMPT]' -}}\n" +
    "  {%- elif message.role == 'user' -%}\n" +
    "    {{- '[INST] ' + message.content + '[/INST]' -}}\n" +
    "  {%- else -%}\n" +
    "    {{- ' ' + message.content + eos_token -}}\n" +
    "  {%- endif -%}\n" +
    "{%- endfor -%}",
};

/** True when `name` is one of {@linkcode BUILTIN_TEMPLATE_NAMES}. */
export function isBuiltinTemplateName(name: string): name is BuiltinTemplateName {
  return (BUILTIN_TEMPLATE_NAMES as readonly string[]).includes(name);
}

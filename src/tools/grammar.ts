/**
 * The generation parameters of a request with tools (llama.cpp's `common_chat_params`): the
 * grammar that constrains a call to a declared tool and its arguments to the tool's
 * parameters schema, whether it is lazy (`tool_choice: "auto"`: free text until a trigger)
 * or constrains the whole answer (`"required"`, a named function), the triggers, the
 * special tokens to keep whole, extra stop strings and the reasoning tags.
 *
 * Triggers are matched as llama.cpp 2026-10 matches them: against the generation prompt
 * followed by the generated text; the grammar is fed from the trigger (a `word`'s start, a
 * pattern's first capture group), or from the start of the generated text when that lies
 * inside the generation prompt. A non-lazy grammar covers the whole answer, including a
 * leading reasoning block.
 *
 * @example
 * ```ts
 * import { chatGenerationParams } from "./grammar.ts";
 * import { detectToolFormat } from "./detect.ts";
 * const params = chatGenerationParams({
 *   format: detectToolFormat("{{ '<tool_call>' }}"),
 *   tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
 *   toolChoice: "required",
 * });
 * // params.grammar: root ::= "<tool_call>" space ... ; params.grammarLazy === false
 * ```
 *
 * @module
 */
import { gbnfLiteral as lit, SchemaError, SchemaRules } from "../grammar/json_schema.ts";
import { promptOpensReasoning } from "./reasoning.ts";
import { toolParameters } from "./request.ts";
import { typesOf } from "./xml_args.ts";
import type {
  ChatGenerationParams,
  GrammarTrigger,
  ToolChoice,
  ToolDefinition,
  ToolFormat,
  ToolFormatName,
} from "./types.ts";

/** The options of `chatGenerationParams`. */
export interface ChatParamsOptions {
  format: ToolFormat;
  /** The declared tools (checked by `checkTools`). */
  tools?: readonly ToolDefinition[];
  /** Default `auto`. */
  toolChoice?: ToolChoice;
  /** Several calls in one answer; default false. */
  parallelToolCalls?: boolean;
  /** What the template wrote for the assistant turn. */
  generationPrompt?: string;
  /** The request's `enable_thinking` (default true). */
  enableThinking?: boolean;
}

/** A regular expression matching `text` literally. */
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A code point inside a GBNF character class (ASCII punctuation as `\\xHH`). */
function classChar(c: string): string {
  const cp = c.codePointAt(0)!;
  return cp < 0x80 && !/[A-Za-z0-9]/.test(c) ? "\\x" + cp.toString(16).padStart(2, "0") : c;
}

/**
 * Rules for any text that does not contain `word` (llama.cpp's `until`): a rule per state of
 * the word's matching automaton (how much of the word the text ends with, by the KMP failure
 * function), each taking one more character to the next state, never to the whole word, or
 * ending — where the word then following would not appear sooner (the text may end with
 * `\n` before `\n</parameter>\n`, not with `\n</parameter>`). Returns the start rule's
 * name, `not-NAME-0`.
 */
export function excludingRules(rules: SchemaRules, name: string, word: string): string {
  const w = [...word];
  const n = w.length;
  const fail = new Array<number>(n).fill(0);
  for (let i = 1, k = 0; i < n; i++) {
    while (k > 0 && w[i] !== w[k]) k = fail[k - 1];
    if (w[i] === w[k]) k++;
    fail[i] = k;
  }
  const next = (state: number, c: string): number => {
    let k = state;
    while (k > 0 && w[k] !== c) k = fail[k - 1];
    return w[k] === c ? k + 1 : 0;
  };
  const chars = [...new Set(w)];
  const other = `[^${chars.map(classChar).join("")}]`;
  const ruleName = (state: number) => `not-${name}-${state}`;
  // the text may end in a state only if the word then following is not found earlier
  // (ending with "\n</parameter>" before "\n</parameter>\n" would close the value there)
  const mayEnd = (state: number): boolean => {
    let k = state;
    for (let i = 0; i < n - 1; i++) {
      k = next(k, w[i]);
      if (k === n) return false;
    }
    return true;
  };
  for (let state = 0; state < n; state++) {
    const alts = [`${other} ${ruleName(0)}`];
    for (const c of chars) {
      const to = next(state, c);
      if (to < n) alts.push(`${lit(c)} ${ruleName(to)}`);
    }
    rules.addRule(ruleName(state), `( ${alts.join(" | ")} )${mayEnd(state) ? "?" : ""}`);
  }
  return ruleName(0);
}

interface CallRules {
  rules: SchemaRules;
  /** One rule per tool: the tool's call as the format writes it. */
  calls: string[];
}

/** Rules for each tool's arguments, named `NAME-args`; a schema that cannot be enforced names its tool. */
function argumentRules(rules: SchemaRules, tools: readonly ToolDefinition[]): Map<string, string> {
  const out = new Map<string, string>();
  tools.forEach((t, i) => {
    try {
      out.set(t.function.name, rules.addSchema(`${t.function.name}-args`, toolParameters(t)));
    } catch (e) {
      if (e instanceof SchemaError) {
        const err = new SchemaError(`/tools/${i}/function/parameters${e.path}`, e.keyword, "");
        err.message = `tool "${t.function.name}" parameters: ${e.message}`;
        throw err;
      }
      throw e;
    }
  });
  return out;
}

const sp = "space";
const jsonKey = (k: string) => lit(JSON.stringify(k));

/** `{"name": "NAME", "<argsKey>": ARGS}` (with `extra` members before or after). */
function jsonCallRule(
  name: string,
  args: string,
  argsKey: string,
  nameKey = "name",
  extra = "",
): string {
  return [
    `"{" ${sp} ${jsonKey(nameKey)} ${sp} ":" ${sp} ${lit(JSON.stringify(name))}`,
    `${sp} "," ${sp} ${jsonKey(argsKey)} ${sp} ":" ${sp} ${args}`,
    extra,
    `${sp} "}"`,
  ].filter((s) => s !== "").join(" ");
}

/** String keywords a raw XML value cannot be held to (its text is the string itself). */
const XML_STRING_KEYWORDS = ["pattern", "minLength", "maxLength", "format"];

/** The rule for one XML parameter value: raw text for strings, JSON otherwise. */
function xmlValueRule(
  rules: SchemaRules,
  tool: string,
  index: number,
  key: string,
  prop: unknown,
): string {
  const schema = (prop !== null && typeof prop === "object" ? prop : {}) as Record<string, unknown>;
  if (
    Array.isArray(schema.enum) && schema.enum.length > 0 &&
    schema.enum.every((v) => typeof v === "string")
  ) {
    return "(" + schema.enum.map((v) => lit(v as string)).join(" | ") + ")";
  }
  if (typeof schema.const === "string") return lit(schema.const);
  if (!typesOf(schema).includes("string")) return rules.addSchema(`${tool}-${key}-value`, schema);
  for (const k of XML_STRING_KEYWORDS) {
    if (k in schema) {
      const path = `/tools/${index}/function/parameters/properties/${key}`;
      const err = new SchemaError(path, k, "cannot be enforced on Qwen3-Coder's XML parameters");
      err.message = `tool "${tool}" parameters: ${err.message}`;
      throw err;
    }
  }
  // any text is a string of the type (a union's other types are read from it when they parse)
  return excludingRules(rules, "parameter-end", "\n</parameter>\n");
}

/** Most required parameters taken in any order (llama.cpp's `COMMON_CHAT_MAX_PERMUTE`); more: schema order. */
const MAX_PERMUTE = 6;
/** Most optional parameters taken as any subset in any order; more: each optional, in schema order. */
const MAX_OPTIONAL_SUBSETS = 8;

/**
 * Rules taking each of `params` once, in any order (all of them, or any subset): one rule per
 * set of parameters still to come.
 */
function anyOrder(rules: SchemaRules, name: string, params: string[], all: boolean): string {
  const names = new Map<number, string>();
  const ruleFor = (left: number): string => {
    const known = names.get(left);
    if (known !== undefined) return known;
    const rule = `${name}-${left}`;
    names.set(left, rule);
    const alts: string[] = [];
    params.forEach((p, i) => {
      const bit = 1 << i;
      if (left & bit) {
        const rest = left & ~bit;
        alts.push(rest === 0 ? p : `${p} ${ruleFor(rest)}`);
      }
    });
    rules.addRule(rule, all ? `( ${alts.join(" | ")} )` : `( ${alts.join(" | ")} )?`);
    return rule;
  };
  return ruleFor((1 << params.length) - 1);
}

/**
 * Qwen3-Coder's `<parameter=KEY>\nVALUE\n</parameter>\n` rules for a tool: the required
 * parameters in any order, then any of the optional ones, each once, in any order (llama.cpp
 * lets an optional one repeat).
 */
function xmlParameterRules(rules: SchemaRules, tool: ToolDefinition, index: number): string {
  const schema = toolParameters(tool);
  const props = (schema.properties ?? {}) as Record<string, unknown>;
  const required = new Set(Array.isArray(schema.required) ? schema.required as string[] : []);
  const name = tool.function.name;
  const req: string[] = [];
  const opt: string[] = [];
  for (const [key, prop] of Object.entries(props)) {
    const value = xmlValueRule(rules, name, index, key, prop);
    const rule = rules.addRule(
      `${name}-${key}-param`,
      `${lit(`<parameter=${key}>\n`)} ${value} ${lit("\n</parameter>\n")}`,
    );
    (required.has(key) ? req : opt).push(rule);
  }
  const parts: string[] = [];
  if (req.length > 1 && req.length <= MAX_PERMUTE) {
    // named by the tool's index: referenced before they are added, they must keep their names
    parts.push(anyOrder(rules, `tool${index}-required`, req, true));
  } else parts.push(...req);
  if (opt.length > 1 && opt.length <= MAX_OPTIONAL_SUBSETS) {
    parts.push(anyOrder(rules, `tool${index}-optional`, opt, false));
  } else parts.push(...opt.map((o) => `${o}?`));
  return parts.join(" ");
}

/** The call rules of a format (one per tool). */
function callRules(format: ToolFormatName, tools: readonly ToolDefinition[]): CallRules {
  const rules = new SchemaRules();
  const args = argumentRules(rules, tools);
  const calls = tools.map((t, index) => {
    const name = t.function.name;
    const a = args.get(name)!;
    const rule = (body: string) => rules.addRule(`${name}-call`, body);
    switch (format) {
      case "hermes":
        return rule(
          `"<tool_call>" ${sp} ${jsonCallRule(name, a, "arguments")} ${sp} "</tool_call>"`,
        );
      case "generic":
      case "granite":
      case "firefunction-v2":
        return rule(jsonCallRule(name, a, "arguments"));
      case "llama3":
        return rule(jsonCallRule(name, a, "parameters"));
      case "mistral-nemo":
        return rule(
          jsonCallRule(
            name,
            a,
            "arguments",
            "name",
            `${sp} "," ${sp} "\\"id\\"" ${sp} ":" ${sp} "\\"" [a-zA-Z0-9]{9} "\\""`,
          ),
        );
      case "command-r7b":
        return rule(
          `"{" ${sp} "\\"tool_call_id\\"" ${sp} ":" ${sp} "\\"" [0-9]{1,4} "\\"" ${sp} "," ${sp} ` +
            `"\\"tool_name\\"" ${sp} ":" ${sp} ${lit(JSON.stringify(name))} ${sp} "," ${sp} ` +
            `"\\"parameters\\"" ${sp} ":" ${sp} ${a} ${sp} "}"`,
        );
      case "mistral-small":
        return rule(`"[TOOL_CALLS]" ${lit(name)} ("[CALL_ID]" [a-zA-Z0-9]{9})? "[ARGS]" ${a}`);
      case "functionary-v3.1":
        return rule(`${lit(`<function=${name}>`)} ${a} "</function>"`);
      case "functionary-v3.2":
        return rule(`${lit(`${name}\n`)} ${a}`);
      case "deepseek-r1":
        return rule(
          `"<｜tool▁call▁begin｜>function<｜tool▁sep｜>" ${
            lit(name)
          } "\\n\`\`\`json\\n" ${a} "\\n"? "\`\`\`<｜tool▁call▁end｜>"`,
        );
      case "deepseek-v3.1":
        return rule(
          `"<｜tool▁call▁begin｜>" ${lit(name)} "<｜tool▁sep｜>" ${a} "<｜tool▁call▁end｜>"`,
        );
      case "qwen3-coder":
        return rule(
          `${lit(`<function=${name}>\n`)} ${xmlParameterRules(rules, t, index)} "</function>\\n"`,
        );
      case "gpt-oss":
        return rule(
          `( " to=functions." ${lit(name)} ("<|channel|>" ("commentary" | "analysis"))? | ` +
            `"<|channel|>" ("commentary" | "analysis") " to=functions." ${lit(name)} ) ` +
            `(" <|constrain|>json" | " json")? "<|message|>" ${a}`,
        );
      default:
        throw new Error(`no call grammar for the format ${format}`);
    }
  });
  return { rules, calls };
}

/** The rule for one call or (parallel) several, wrapped as the format writes a section. */
function sectionRule(format: ToolFormat, call: string, parallel: boolean): string {
  const many = (sep: string) => (parallel ? `${call} (${sep} ${call})*` : call);
  switch (format.name) {
    case "hermes":
      return many(sp);
    case "qwen3-coder": {
      // Qwen3-Coder (no reasoning) may leave out the first <tool_call>, as llama.cpp allows
      const first = format.thinkingStart === "" ? `"<tool_call>\\n"?` : `"<tool_call>\\n"`;
      return parallel
        ? `${first} ${call} "</tool_call>" (${sp} "<tool_call>\\n" ${call} "</tool_call>")*`
        : `${first} ${call} "</tool_call>"`;
    }
    case "llama3":
    case "gpt-oss":
      return call;
    case "mistral-nemo":
      return `"[TOOL_CALLS]" "[" ${sp} ${many(`"," ${sp}`)} ${sp} "]"`;
    case "mistral-small":
      return many("");
    case "firefunction-v2":
      return `" functools[" ${sp} ${many(`"," ${sp}`)} ${sp} "]"`;
    case "granite":
      return `"<|tool_call|>[" ${sp} ${many(`"," ${sp}`)} ${sp} "]"`;
    case "command-r7b":
      return `"<|START_ACTION|>[" ${sp} ${many(`"," ${sp}`)} ${sp} "]<|END_ACTION|>"`;
    case "functionary-v3.1":
      return many(sp);
    case "functionary-v3.2":
      return `">>>"? ${many(`">>>"`)}`;
    case "deepseek-r1":
    case "deepseek-v3.1":
      return `"<｜tool▁calls▁begin｜>" ${many("")} "<｜tool▁calls▁end｜>"`;
    case "generic":
      // llama.cpp's former generic format: one call under "tool_call", several under "tool_calls"
      return parallel
        ? `"{" ${sp} "\\"tool_calls\\"" ${sp} ":" ${sp} "[" ${sp} ${
          many(`"," ${sp}`)
        } ${sp} "]" ${sp} "}"`
        : `"{" ${sp} "\\"tool_call\\"" ${sp} ":" ${sp} ${call} ${sp} "}"`;
    default:
      throw new Error(`no section grammar for the format ${format.name}`);
  }
}

/** Lazy triggers of a format (the text a call starts with). */
function triggers(
  format: ToolFormat,
  names: string[],
  generationPrompt: string,
): GrammarTrigger[] {
  const alt = names.map(escapeRegex).join("|");
  switch (format.name) {
    case "hermes":
      return [{ kind: "word", value: "<tool_call>" }];
    case "qwen3-coder":
      // and for Qwen3-Coder a whole `<function=NAME>` (not `<function`, which code may hold)
      return [
        { kind: "word", value: "<tool_call>" },
        ...(format.thinkingStart === ""
          ? names.map((n) => ({ kind: "word" as const, value: `<function=${n}>` }))
          : []),
      ];
    case "llama3":
      return [{
        kind: "pattern_full",
        value: `${escapeRegex(generationPrompt)}\\s*(\\{\\s*"name"\\s*:\\s*"(?:${alt})")[\\s\\S]*`,
      }];
    case "mistral-nemo":
    case "mistral-small":
      return [{ kind: "word", value: "[TOOL_CALLS]" }];
    case "firefunction-v2":
      return [{ kind: "word", value: " functools[" }];
    case "granite":
      return [{ kind: "word", value: "<|tool_call|>" }];
    case "command-r7b":
      return [{ kind: "word", value: "<|START_ACTION|>" }];
    case "functionary-v3.1":
      return [{ kind: "word", value: "<function=" }];
    case "functionary-v3.2":
      return [{ kind: "pattern", value: `>>>((?:${alt})\\n)` }];
    case "deepseek-r1":
    case "deepseek-v3.1":
      return [{ kind: "word", value: "<｜tool▁calls▁begin｜>" }];
    case "gpt-oss":
      return [{
        kind: "pattern",
        value:
          `<\\|start\\|>assistant(?:<\\|channel\\|>(?:commentary|analysis))?( to=functions\\.(?:${alt})\\b)`,
      }];
    default:
      return [];
  }
}

/** Special tokens each format needs kept whole. */
const PRESERVED: Partial<Record<ToolFormatName, string[]>> = {
  "hermes": ["<tool_call>", "</tool_call>"],
  "qwen3-coder": ["<tool_call>", "</tool_call>"],
  "llama3": ["<|python_tag|>"],
  "mistral-nemo": ["[TOOL_CALLS]"],
  "mistral-small": ["[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"],
  "functionary-v3.1": ["<|python_tag|>"],
  "functionary-v3.2": [">>>all"],
  "firefunction-v2": [" functools["],
  "granite": ["<|tool_call|>"],
  "command-r7b": [
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    "<|START_RESPONSE|>",
    "<|END_RESPONSE|>",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
  ],
  "deepseek-r1": [
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
  ],
  "gpt-oss": ["<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"],
};
PRESERVED["deepseek-v3.1"] = PRESERVED["deepseek-r1"];

/**
 * The system message llama.cpp's generic format adds for a template that renders no tool
 * calls (the template's renderer also lists the tools for the model).
 */
export const GENERIC_TOOLS_SYSTEM_PROMPT =
  "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's request";

/**
 * The generation prompt: what rendering with `add_generation_prompt` adds to rendering
 * without it (llama.cpp's `common_chat_template_generation_prompt`: the text after their
 * common prefix).
 */
export function generationPromptOf(withPrompt: string, withoutPrompt: string): string {
  let n = 0;
  const max = Math.min(withPrompt.length, withoutPrompt.length);
  while (n < max && withPrompt[n] === withoutPrompt[n]) n++;
  return withPrompt.slice(n);
}

/** The generation parameters of a request (see the module documentation). Throws `SchemaError`. */
export function chatGenerationParams(options: ChatParamsOptions): ChatGenerationParams {
  const { format } = options;
  const generationPrompt = options.generationPrompt ?? "";
  const choice = options.toolChoice ?? "auto";
  let tools = choice === "none" ? [] : [...(options.tools ?? [])];
  if (typeof choice === "object") {
    tools = tools.filter((t) => t.function.name === choice.function.name);
  }
  const preserved = [...(PRESERVED[format.name] ?? [])];
  if (format.thinkingStart !== "" && format.name !== "gpt-oss") {
    preserved.push(format.thinkingStart, format.thinkingEnd);
  }
  const params: ChatGenerationParams = {
    format,
    grammar: "",
    grammarLazy: false,
    grammarTriggers: [],
    preservedTokens: [...new Set(preserved)],
    additionalStops: format.name === "gpt-oss" ? ["<|call|>"] : [],
    thinkingStartTag: format.thinkingStart,
    thinkingEndTags: format.thinkingEnd === ""
      ? []
      // Qwen3.5 / Nemotron 3: a call also ends the reasoning block (llama.cpp's end tags)
      : format.name === "qwen3-coder"
      ? [format.thinkingEnd, "<tool_call>"]
      : [format.thinkingEnd],
    generationPrompt,
    tools,
    toolNames: tools.map((t) => t.function.name),
    parallelToolCalls: options.parallelToolCalls ?? false,
  };
  if (tools.length === 0) return params;
  const parallel = params.parallelToolCalls && typeof choice !== "object";
  const { rules, calls } = callRules(format.name, tools);
  const call = rules.addRule("tool-call", calls.join(" | "));
  let section = rules.addRule("tool-calls", sectionRule(format, call, parallel));
  const lazy = choice === "auto" && format.name !== "generic";
  const pythonTag = (format.name === "llama3" || format.name === "functionary-v3.1") &&
    params.toolNames.includes("python");
  if (pythonTag) {
    // raw code after <|python_tag|> is a call to the python tool (any text is a code string)
    section = rules.addRule("tool-calls-or-code", `${section} | "<|python_tag|>" [^\\x00]*`);
  }
  if (lazy) {
    rules.addRule("root", `${section} ${sp}`);
    params.grammarTriggers = triggers(format, params.toolNames, generationPrompt);
    if (pythonTag) params.grammarTriggers.push({ kind: "word", value: "<|python_tag|>" });
  } else if (format.name === "generic" && choice === "auto") {
    const response = rules.addRule(
      "response",
      `"{" ${sp} "\\"response\\"" ${sp} ":" ${sp} string ${sp} "}"`,
    );
    rules.addSchema("response-string", { type: "string" });
    rules.addRule("root", `${section} | ${response}`);
  } else {
    rules.addRule(
      "root",
      `${
        reasoningPrefix(format, generationPrompt, options.enableThinking ?? true, rules)
      }${section} ${sp}`,
    );
  }
  params.grammar = rules.format();
  params.grammarLazy = lazy;
  return params;
}

/** A non-lazy grammar's leading reasoning block: required when the prompt opened it, else optional. */
function reasoningPrefix(
  format: ToolFormat,
  generationPrompt: string,
  enableThinking: boolean,
  rules: SchemaRules,
): string {
  if (format.name === "gpt-oss") {
    const body = excludingRules(rules, "analysis-end", "<|end|>");
    rules.addRule(
      "reasoning",
      `"<|channel|>analysis<|message|>" ${body} "<|end|>" "<|start|>assistant"`,
    );
    return "reasoning? ";
  }
  if (format.thinkingStart === "") return "";
  const body = excludingRules(rules, "reasoning-end", format.thinkingEnd);
  if (
    enableThinking &&
    promptOpensReasoning(generationPrompt, format.thinkingStart, format.thinkingEnd)
  ) {
    rules.addRule("reasoning", `${body} ${lit(format.thinkingEnd)} ${sp}`);
    return "reasoning ";
  }
  rules.addRule(
    "reasoning",
    `${lit(format.thinkingStart)} ${body} ${lit(format.thinkingEnd)} ${sp}`,
  );
  return "reasoning? ";
}

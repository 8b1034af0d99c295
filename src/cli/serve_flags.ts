/**
 * llama-server's flags under their own names, for `dotllm serve`: so that
 * `llama-server ARGS` becomes `dotllm serve ARGS`. A flag dotllm honours is
 * read by `serve.ts` (`-m`, `--alias`, `--metrics`, `--slots`,
 * `--slot-save-path`, `--props`, `--no-webui`, `--chat-template-file`,
 * `--cors-origins`, `-hf`, ...); a flag that changes nothing here (a GPU, flash
 * attention, memory locking, a log level) is accepted with one notice line
 * on stderr, never silently; a flag whose meaning dotllm lacks and which
 * would change the answers (a LoRA adapter, a draft model, grouped
 * attention, a quantized KV cache) is a usage error naming it.
 *
 * @module
 */
import { UsageError } from "./command.ts";
import type { OptionValues } from "./command.ts";
import type { Command } from "./command.ts";

type Options = Command["options"];

/** llama-server's flags dotllm reads (beyond the ones `dotllm serve` already had). */
export const LLAMA_SERVER_OPTIONS: Options = {
  model: { type: "string", short: "m" },
  alias: { type: "string", short: "a" },
  tags: { type: "string" },
  "chat-template-file": { type: "string" },
  jinja: { type: "boolean" },
  "no-jinja": { type: "boolean" },
  metrics: { type: "boolean" },
  slots: { type: "boolean" },
  "no-slots": { type: "boolean" },
  props: { type: "boolean" },
  "slot-save-path": { type: "string" },
  "no-webui": { type: "boolean" },
  "no-ui": { type: "boolean" },
  "hf-repo": { type: "string" },
  "hf-file": { type: "string" },
  "no-context-shift": { type: "boolean" },
  embedding: { type: "boolean" },
  "cors-origins": { type: "string" },
  "no-cors-credentials": { type: "boolean" },
  offline: { type: "boolean" },
  // accepted, no effect (see NO_EFFECT)
  "kv-unified": { type: "boolean" },
  "no-kv-unified": { type: "boolean" },
  "cont-batching": { type: "boolean" },
  "no-cont-batching": { type: "boolean" },
  "n-gpu-layers": { type: "string" },
  "ubatch-size": { type: "string" },
  "flash-attn": { type: "string" },
  "threads-batch": { type: "string" },
  "threads-http": { type: "string" },
  verbose: { type: "boolean" },
  "log-disable": { type: "boolean" },
  "log-verbosity": { type: "string" },
  mlock: { type: "boolean" },
  "no-mmap": { type: "boolean" },
  "no-warmup": { type: "boolean" },
  "swa-full": { type: "boolean" },
  "no-mmproj": { type: "boolean" },
  "reasoning-format": { type: "string" },
  reasoning: { type: "string" },
  "reasoning-budget": { type: "string" },
  "cache-ram": { type: "string" },
  "no-cache-idle-slots": { type: "boolean" },
  "sleep-idle-seconds": { type: "string" },
  timeout: { type: "string" },
  "cache-reuse": { type: "string" },
  "no-prefill-assistant": { type: "boolean" },
  // refused: they change the answers and dotllm lacks them (see REFUSED)
  lora: { type: "string" },
  "grp-attn-n": { type: "string" },
  "grp-attn-w": { type: "string" },
  mmproj: { type: "string" },
  "mmproj-url": { type: "string" },
  "model-url": { type: "string" },
  "context-shift": { type: "boolean" },
};

/** llama-server's short spellings `parseArgs` cannot take, each mapped to its long flag. */
export const LLAMA_SERVER_ALIASES: Readonly<Record<string, string>> = {
  "-np": "--parallel",
  "-ngl": "--n-gpu-layers",
  "--gpu-layers": "--n-gpu-layers",
  "-ub": "--ubatch-size",
  "-fa": "--flash-attn",
  "-tb": "--threads-batch",
  "-to": "--timeout",
  "-mu": "--model-url",
  "-hf": "--hf-repo",
  "-hfr": "--hf-repo",
  "-hff": "--hf-file",
  "-lv": "--log-verbosity",
  "-kvu": "--kv-unified",
  "-cb": "--cont-batching",
  "-nocb": "--no-cont-batching",
  "--embeddings": "--embedding",
};

/** Flags accepted without effect, and the notice each gets. */
const NO_EFFECT: Readonly<Record<string, string>> = {
  "kv-unified": "every slot keeps its own --ctx-size/--parallel positions (no shared pool)",
  "no-kv-unified": "every slot keeps its own --ctx-size/--parallel positions",
  "cont-batching": "batching is always continuous",
  "no-cont-batching": "batching is always continuous",
  "n-gpu-layers": "dotllm runs on the CPU",
  "ubatch-size": "a step runs --batch-size tokens",
  "flash-attn": "attention has one CPU kernel",
  "threads-batch": "prompts and decodes share --threads",
  "threads-http": "the HTTP thread is one event loop",
  verbose: "dotllm has one log level",
  "log-disable": "dotllm logs only start-up, warnings and shutdown",
  "log-verbosity": "dotllm has one log level",
  mlock: "the weights are copied into memory at load (or mapped with --no-repack)",
  "no-mmap": "the weights are copied into memory at load unless --no-repack",
  "no-warmup": "there is no warm-up run",
  "swa-full": "sliding-window layers keep the window they need",
  "no-mmproj": "there is no multimodal projector",
  "reasoning-budget": "reasoning is not budgeted",
  "cache-ram": "prompts are cached in the slots only",
  "no-cache-idle-slots": "prompts are cached in the slots only",
  "sleep-idle-seconds": "the model stays loaded",
  timeout: "connections time out as dotllm's HTTP server sets",
  "cache-reuse": "a slot's cached prefix is reused as it is",
  "no-prefill-assistant": "an assistant message last is rendered as the template does",
  jinja: "chat templates are always rendered with Jinja",
  "no-jinja": "chat templates are always rendered with Jinja",
  embedding: "embeddings are always served",
  offline: "only a Hub reference given as MODEL is fetched",
  "no-context-shift": "the context is never shifted",
};

/** Flags refused, with the reason. */
const REFUSED: Readonly<Record<string, string>> = {
  lora: "LoRA adapters are not supported",
  "grp-attn-n": "grouped attention (self-extend) is not supported",
  "grp-attn-w": "grouped attention (self-extend) is not supported",
  mmproj: "multimodal input is not supported",
  "mmproj-url": "multimodal input is not supported",
  "model-url": "give the model as MODEL (a file or a Hub reference)",
  "context-shift": "context shifting is not supported (a reply ends when the slot is full)",
};

/**
 * Checks llama-server's flags: a refused one is a {@linkcode UsageError};
 * each accepted one without effect gets `notice(line)` (one line). `-fa off|auto`
 * is accepted quietly.
 */
export function checkLlamaServerFlags(
  values: OptionValues,
  notice: (line: string) => void,
): void {
  for (const [flag, why] of Object.entries(REFUSED)) {
    if (values[flag] === undefined) continue;
    const v = values[flag];
    if (v === false) continue;
    throw new UsageError(`--${flag}: ${why}`);
  }
  for (const [flag, why] of Object.entries(NO_EFFECT)) {
    const v = values[flag];
    if (v === undefined || v === false) continue;
    if (flag === "flash-attn" && (v === "off" || v === "auto")) continue;
    if (flag === "n-gpu-layers" && v === "0") continue;
    notice(`dotllm: notice: --${flag} has no effect here: ${why}`);
  }
}

/** Names wrapped into help lines under an indent. */
function wrapped(names: string[], indent: string): string {
  const lines: string[] = [];
  let line = indent;
  for (const n of names) {
    const item = `--${n}`;
    if (line.length + item.length + 1 > 80 && line !== indent) {
      lines.push(line.trimEnd());
      line = indent;
    }
    line += item + " ";
  }
  lines.push(line.trimEnd());
  return lines.join("\n") + "\n";
}

/** The help section of llama-server's flags (every one named, as `--help` must). */
export const LLAMA_SERVER_HELP: string =
  `  llama-server's flags (docs/SERVER.md), so \`llama-server ARGS\` is \`dotllm serve ARGS\`:
  -m, --model FILE         the model (instead of MODEL); --hf-repo REPO [--hf-file F]
                           (-hf, -hff): a Hub reference
  -a, --alias A[,B]        the names /models reports (--tags T[,U]: its tags)
      --metrics            serve /metrics (off without it, as llama-server)
      --slots, --no-slots  serve /slots (default on); --props: allow POST /props
      --slot-save-path DIR where /slots/ID?action=save|restore keep slot files
      --no-webui, --no-ui  no page at /
      --chat-template-file FILE   as --chat-template FILE
      --cors-origins O     as --cors; --no-cors-credentials: no credentials with *
      --embedding, --jinja, --no-jinja: accepted, always on here
  Accepted with a one-line notice, no effect here:
${
    wrapped(
      Object.keys(NO_EFFECT).filter((n) => !["jinja", "no-jinja", "embedding"].includes(n)),
      "      ",
    )
  }\
  Refused (they would change the answers and dotllm lacks them):
${wrapped(Object.keys(REFUSED), "      ")}`;

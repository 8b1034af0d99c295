/**
 * `dotllm list`: the GGUF models in the Hugging Face cache.
 *
 * @module
 */
import type { Command } from "./command.ts";
import { UsageError } from "./command.ts";
import { writeStdout } from "./io.ts";
import { listCachedModels } from "../hub/manage.ts";
import { hubCacheDir } from "../hub/cache.ts";

function formatSize(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

/** The `list` command. */
export const listCommand: Command = {
  name: "list",
  summary: "list the models in the Hugging Face cache",
  usage: `Usage: dotllm list [--json]

Lists the GGUF models in the Hugging Face cache ($HF_HUB_CACHE, default
$HF_HOME/hub = ~/.cache/huggingface/hub), whoever downloaded them: name
(ORG/REPO:QUANT), quant, size (all parts of a split model), and the path to load.

Options:
  --json   print one JSON array: [{name, repo, file, quant, part_count, size_bytes,
           commit, refs, path}]
`,
  options: { json: { type: "boolean" } },
  run(values, positionals) {
    if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const models = listCachedModels();
    if (values.json) {
      writeStdout(JSON.stringify(models, null, 2) + "\n");
      return 0;
    }
    if (models.length === 0) {
      writeStdout(`no models in ${hubCacheDir()}\n`);
      return 0;
    }
    const rows = [["NAME", "QUANT", "SIZE", "PATH"]];
    for (const m of models) {
      rows.push([m.name, m.quant || "-", formatSize(m.size_bytes), m.path]);
    }
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    writeStdout(
      rows.map((r) => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i])).join("  "))
        .join("\n") + "\n",
    );
    return 0;
  },
};

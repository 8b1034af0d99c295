/**
 * `dotllm quantize IN.gguf [OUT.gguf] TYPE [THREADS]`: llama-quantize's
 * command (same type names, options and output bytes, no importance matrix).
 *
 * @module
 */
import { basename, dirname, join } from "node:path";
import process from "node:process";
import type { Command } from "./command.ts";
import { UsageError } from "./command.ts";
import { writeStderr, writeStdout } from "./io.ts";
import { stderrIsTerminal } from "./terminal.ts";
import { modelPath } from "./options.ts";
import { existsSync } from "node:fs";
import { parseHubRef } from "../hub/ref.ts";
import { parseGgmlTypeName, parseQuantType, QUANT_TYPES } from "../quantize/ftype.ts";
import { QuantizeError, type QuantizeOptions } from "../quantize/plan.ts";
import { planFile, quantizeFile, type QuantizeProgress } from "../quantize/quantize.ts";
import type { QuantizationPlan } from "../quantize/plan.ts";

const supportedNames = QUANT_TYPES.filter((q) => q.supported).map((q) => q.name);

const PROGRESS_INTERVAL_MS = 100;

function ggmlTypeOption(value: unknown, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const t = parseGgmlTypeName(String(value));
  if (t === undefined) throw new UsageError(`${flag}: unknown ggml type "${value}"`);
  return t.id;
}

function lowerName(name: string): string {
  return name.toLowerCase().replace(/_k$/, "_K");
}

function planJson(plan: QuantizationPlan, input: string, output: string | null, type: string) {
  return {
    input,
    output,
    type,
    file_type: plan.ftype,
    size_bytes: plan.fileSizeBytes,
    tensors: plan.tensors.map((t) => ({
      name: t.name,
      shape: t.dims,
      from: t.from.name,
      to: t.to.name,
      size_bytes: t.sizeBytes,
    })),
    fallbacks: plan.warnings,
  };
}

/** The `quantize` command. */
export const quantizeCommand: Command = {
  name: "quantize",
  summary: "quantize a GGUF file to another type or mix, byte-identical to llama-quantize",
  usage: [
    "Usage: dotllm quantize [options] IN.gguf [OUT.gguf] TYPE [THREADS]",
    "",
    "Writes IN.gguf with its tensors converted to TYPE, exactly as llama-quantize (of the",
    "llama.cpp this dotllm follows) writes it without an importance matrix: same per-tensor",
    "types, metadata, layout and bytes. Without OUT.gguf the output is",
    "<dir of IN>/ggml-model-TYPE.gguf (./ggml-model-TYPE.gguf when IN is a Hugging Face Hub",
    "reference: owner/repo[:QUANT], pulled first). OUT is written to a temporary file beside it and",
    "renamed when complete; on failure nothing is left at OUT.",
    "",
    `TYPE: ${supportedNames.join(" ")}`,
    "      (or llama.cpp's file-type number; Q3_K, Q4_K and Q5_K are the _M mixes)",
    "THREADS: threads that convert (default: one per CPU); the output does not depend on it.",
    "",
    "Options:",
    "  --allow-requantize            also convert tensors that are already quantized",
    "                                (dequantized to f32 first, as llama-quantize does)",
    "  --pure                        no mix: every quantizable tensor gets TYPE's tensor type",
    "  --leave-output-tensor         keep output.weight as it is",
    "  --output-tensor-type T        output.weight (and tied embeddings) as ggml type T",
    "  --token-embedding-type T      token_embd.weight as ggml type T",
    "  --dry-run                     print what would be written; write nothing",
    "  --json                        print a JSON document (input, output, type, file_type,",
    "                                size_bytes, tensors [{name, shape, from, to, size_bytes}],",
    "                                fallbacks) on stdout",
    "",
    "A progress line is drawn on stderr when it is a terminal. Exit 1 (one line on stderr)",
    "for a file that cannot be read or written (full disk included) or a tensor that cannot",
    "be converted; 2 for a usage error such as an unknown TYPE.",
  ].join("\n"),
  options: {
    "allow-requantize": { type: "boolean" },
    pure: { type: "boolean" },
    "leave-output-tensor": { type: "boolean" },
    "output-tensor-type": { type: "string" },
    "token-embedding-type": { type: "string" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
  },
  async run(values, positionals) {
    if (positionals.length < 2) {
      throw new UsageError(positionals.length === 0 ? "missing IN.gguf" : "missing TYPE");
    }
    // IN may be a Hub reference (pulled first); the default OUT of one is then in the
    // current directory, not in the Hugging Face cache.
    const inputArg = positionals[0];
    const fromHub = !existsSync(inputArg) && parseHubRef(inputArg) !== undefined;
    const inputDir = fromHub ? "." : dirname(inputArg);
    let output: string;
    let typeText: string;
    let rest: string[];
    // llama-quantize: `IN TYPE` when the second argument names a type, else `IN OUT TYPE`.
    if (parseQuantType(positionals[1]) !== undefined) {
      typeText = positionals[1];
      const name = parseQuantType(typeText)!.name;
      output = join(inputDir, `ggml-model-${name}.gguf`);
      rest = positionals.slice(2);
    } else {
      if (positionals.length < 3) throw new UsageError("missing TYPE");
      output = positionals[1];
      typeText = positionals[2];
      rest = positionals.slice(3);
    }
    const type = parseQuantType(typeText);
    if (type === undefined) {
      throw new UsageError(`unknown quantization type "${typeText}"`);
    }
    if (!type.supported) {
      throw new UsageError(
        `quantization type ${type.name} is not supported (supported: ${supportedNames.join(" ")})`,
      );
    }
    if (rest.length > 1) throw new UsageError(`unexpected argument "${rest[1]}"`);
    if (rest.length === 1 && !/^\s*[+-]?\d+/.test(rest[0])) {
      throw new UsageError(`invalid THREADS "${rest[0]}"`);
    }
    // std::stoi as llama-quantize reads it; <= 0 means one per CPU.
    const threadCount = rest.length === 1 ? Number(/^\s*([+-]?\d+)/.exec(rest[0])![1]) : 0;
    const options: QuantizeOptions = {
      type,
      allowRequantize: values["allow-requantize"] === true,
      pure: values.pure === true,
      leaveOutputTensor: values["leave-output-tensor"] === true,
      outputTensorType: ggmlTypeOption(values["output-tensor-type"], "--output-tensor-type"),
      tokenEmbeddingType: ggmlTypeOption(values["token-embedding-type"], "--token-embedding-type"),
    };
    const input = await modelPath(inputArg);

    try {
      if (values["dry-run"]) {
        const plan = planFile(input, options);
        if (values.json) {
          writeStdout(JSON.stringify(planJson(plan, input, null, type.name), null, 2) + "\n");
        } else {
          const lines = plan.tensors.map((t) =>
            `${t.name.padEnd(36)} ${lowerName(t.from.name).padStart(6)} -> ${
              lowerName(t.to.name).padEnd(6)
            } ${t.dims.join(" x ")}`
          );
          writeStdout(lines.join("\n") + `\n${plan.fileSizeBytes} bytes\n`);
        }
        return 0;
      }
      const started = performance.now();
      const show = stderrIsTerminal();
      let lastDraw = 0;
      let width = 0;
      const onProgress = show
        ? (p: QuantizeProgress) => {
          const now = performance.now();
          if (now - lastDraw < PROGRESS_INTERVAL_MS) return;
          lastDraw = now;
          const percent = Math.floor((p.doneBytes / Math.max(1, p.totalBytes)) * 100);
          const line = `dotllm: quantizing ${basename(output)} ${String(percent).padStart(3)}% ` +
            `[${
              String(p.tensorIndex + 1).padStart(String(p.tensorCount).length)
            }/${p.tensorCount}] ` +
            `${p.tensor.name} ${lowerName(p.tensor.from.name)} -> ${lowerName(p.tensor.to.name)}`;
          width = Math.max(width, line.length);
          writeStderr(`\r${line.padEnd(width)}`);
        }
        : undefined;
      let result;
      // Ctrl-C stops between slabs and removes the temporary file (exit 130).
      const abort = new AbortController();
      const onSignal = () => abort.abort();
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
      try {
        result = await quantizeFile(
          input,
          output,
          { ...options, threadCount, signal: abort.signal },
          onProgress,
        );
      } catch (error) {
        if (abort.signal.aborted) {
          if (show && width > 0) writeStderr(`\r${" ".repeat(width)}\r`);
          writeStderr(`dotllm: interrupted; nothing written to ${output}\n`);
          return 130;
        }
        throw error;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
        if (show && width > 0) writeStderr(`\r${" ".repeat(width)}\r`);
      }
      const seconds = (performance.now() - started) / 1000;
      const plan = result.plan;
      if (values.json) {
        writeStdout(
          JSON.stringify(
            { ...planJson(plan, input, output, type.name), seconds: Number(seconds.toFixed(3)) },
            null,
            2,
          ) + "\n",
        );
      }
      if (plan.warnings.length > 0) {
        writeStderr(
          `dotllm: ${plan.warnings.length} of ${plan.tensors.length} tensors fell back to another ` +
            `type (rows not a multiple of the block; --dry-run lists every tensor's type)\n`,
        );
      }
      writeStderr(
        `dotllm: wrote ${output} (${type.name}, ${plan.tensors.length} tensors, ` +
          `${result.fileSizeBytes} bytes) in ${seconds.toFixed(1)} s\n`,
      );
      return 0;
    } catch (error) {
      if (error instanceof QuantizeError) throw new Error(error.message);
      throw error;
    }
  },
};

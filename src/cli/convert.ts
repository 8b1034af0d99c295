/**
 * `dotllm convert HF_DIR [OUT.gguf] [--outtype f32|f16|bf16|q8_0]`: a Hugging
 * Face folder to GGUF, as llama.cpp's `convert_hf_to_gguf.py` writes it.
 *
 * @module
 */
import { basename } from "node:path";
import { type Command, UsageError } from "./command.ts";
import { writeStderr, writeStdout } from "./io.ts";
import { stderrIsTerminal } from "./terminal.ts";
import { convertHf, OUT_TYPES, type OutType } from "../convert/mod.ts";

const PROGRESS_INTERVAL_MS = 100;

/** The `convert` command. */
export const convertCommand: Command = {
  name: "convert",
  summary: "convert a Hugging Face safetensors folder to GGUF",
  usage: `Usage: dotllm convert HF_DIR [OUT.gguf] [--outtype f32|f16|bf16|q8_0]

Reads HF_DIR's config.json, model.safetensors (or the shards of
model.safetensors.index.json), tokenizer_config.json and its tokenizer and writes the
GGUF file llama.cpp's convert_hf_to_gguf.py writes (same keys, tensors, order, bytes).
Architectures: BertModel (all-MiniLM, bge, e5), LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM.
Tokenizers: tokenizer.json (WordPiece, byte-level BPE) or a SentencePiece
tokenizer.model (Gemma 3, Phi-3; Llama and Mistral when the folder has one), with
added_tokens.json and tokenizer_config.json's added tokens.
OUT defaults to HF_DIR/<folder>-<OUTTYPE>.gguf; it is written under a temporary name
and renamed when complete. Prints the path written.

Options:
  --outtype T   f32, f16 (default), bf16 or q8_0 (2-D weights; norms, biases and
                position embeddings stay f32, as there)
`,
  options: { outtype: { type: "string" } },
  run(values, positionals) {
    const [dir, out, ...extra] = positionals;
    if (dir === undefined) throw new UsageError("missing HF_DIR");
    if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
    const outType = (values.outtype as string | undefined ?? "f16").toLowerCase();
    if (!(OUT_TYPES as readonly string[]).includes(outType)) {
      throw new UsageError(`--outtype must be one of ${OUT_TYPES.join(", ")}, got "${outType}"`);
    }
    const show = stderrIsTerminal();
    let lastDraw = 0, width = 0;
    const result = convertHf(dir, {
      out,
      outType: outType as OutType,
      onProgress: show
        ? (done, total, tensor) => {
          const now = performance.now();
          if (now - lastDraw < PROGRESS_INTERVAL_MS && done < total) return;
          lastDraw = now;
          const percent = Math.floor((done / Math.max(1, total)) * 100);
          const line = `dotllm: converting ${basename(dir)} ${
            String(percent).padStart(3)
          }% ${tensor}`;
          width = Math.max(width, line.length);
          writeStderr(`\r${line.padEnd(width)}`);
        }
        : undefined,
    });
    if (show && width > 0) writeStderr(`\r${" ".repeat(width)}\r`);
    writeStdout(result.path + "\n");
    return 0;
  },
};

/**
 * `dotllm pull REF...`: downloads models from the Hugging Face Hub into its
 * shared cache and prints the path of each on stdout.
 *
 * @module
 */
import { type Command, UsageError } from "./command.ts";
import { writeStderr, writeStdout } from "./io.ts";
import { pullModel } from "../hub/pull.ts";
import { parseHubRef } from "../hub/ref.ts";

/** The reference forms and the environment, shared by the hub commands' usage. */
export const REF_HELP = `References:
  ORG/REPO[:QUANT]         the GGUF for QUANT (case-insensitive; default Q4_K_M, then Q8_0,
                           then the first GGUF), as llama.cpp's -hf picks it; all parts of
                           a split model
  ORG/REPO/FILE.gguf       that file (and its siblings when it is -00001-of-0000N)
  hf:ORG/REPO...           the same (also hf.co/ORG/REPO...)
  https://HOST/ORG/REPO/resolve/REVISION/FILE   a file URL

Environment:
  HF_TOKEN        token for private and gated repositories (also --token, or the file
                  \`hf auth login\` writes: HF_TOKEN_PATH, default $HF_HOME/token)
  HF_HOME         default ~/.cache/huggingface; the cache is $HF_HUB_CACHE, default $HF_HOME/hub,
                  shared with huggingface_hub and llama.cpp
  HF_ENDPOINT     the Hub server (default https://huggingface.co)
  HF_HUB_OFFLINE  1 = use only the cache
`;

/** The `pull` command. */
export const pullCommand: Command = {
  name: "pull",
  summary: "download a model from the Hugging Face Hub into its cache",
  usage: `Usage: dotllm pull REF... [--token TOKEN] [--json]

Downloads each model into the Hugging Face cache (resuming an interrupted download,
checking its sha256 against the Hub's) unless it is already there, and prints the
path to load (the first part of a split model) on stdout. A progress line is drawn
on stderr when it is a terminal. Other commands take the same references and pull
what is missing first.

Options:
      --token TOKEN   Hub access token (default: HF_TOKEN)
      --json          print one JSON object per model: repo, revision, commit,
                      model_path, offline, files [{file, local_path, size_bytes, etag,
                      transferred_bytes, resumed_bytes}]

${REF_HELP}`,
  options: { token: { type: "string" }, json: { type: "boolean" } },
  async run(values, positionals) {
    if (positionals.length === 0) throw new UsageError("missing REF (like ORG/REPO:Q4_K_M)");
    const refs = positionals.map((text) => {
      const ref = parseHubRef(text);
      if (ref === undefined) {
        throw new UsageError(`"${text}" is not a Hub reference (ORG/REPO[:QUANT] or hf:...)`);
      }
      return ref;
    });
    for (const ref of refs) {
      const model = await pullModel(ref, {
        token: values.token as string | undefined,
        notice: (message) => writeStderr(`dotllm: ${message}\n`),
      });
      writeStdout(values.json ? JSON.stringify(model) + "\n" : model.model_path + "\n");
    }
    return 0;
  },
};

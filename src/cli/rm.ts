/**
 * `dotllm rm REF...`: removes models from the Hugging Face cache.
 *
 * @module
 */
import { type Command, UsageError } from "./command.ts";
import { writeStdout } from "./io.ts";
import { removeCached } from "../hub/manage.ts";
import { parseHubRef } from "../hub/ref.ts";

/** The `rm` command. */
export const rmCommand: Command = {
  name: "rm",
  summary: "remove a model from the Hugging Face cache",
  usage: `Usage: dotllm rm REF...

Removes from the Hugging Face cache:
  ORG/REPO:QUANT       that quant's file(s), every part of a split model
  ORG/REPO/FILE.gguf   that file (and its split siblings)
  ORG/REPO             the whole repository, every file and revision
A blob still linked from another snapshot is kept. Prints each path removed.
`,
  options: {},
  run(_values, positionals) {
    if (positionals.length === 0) throw new UsageError("missing REF (like ORG/REPO:Q4_K_M)");
    for (const text of positionals) {
      const ref = parseHubRef(text);
      if (ref === undefined) throw new UsageError(`"${text}" is not a Hub reference`);
      const removed = removeCached(ref);
      for (const path of removed.paths) writeStdout(`removed ${path}\n`);
    }
    return 0;
  },
};

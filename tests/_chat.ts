/** Models for the chat tests. @module */
import { join } from "node:path";
import { chatTemplateFor } from "../src/chat/mod.ts";
import { openGguf } from "../src/gguf/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { makeModel } from "../src/gguf/make_model.ts";
import { repoRoot, testdata } from "./_testdata.ts";

/** A small random model (made once into `models/`) with SmolLM2's vocabulary and GGUF chat template. */
export function tinyChatModel(): string {
  return makeModel({
    shape: "tiny",
    type: "f32",
    outDir: join(repoRoot, "models"),
    vocabDir: testdata("vocab-converted"),
  }).path;
}

const decoder = new TextDecoder();
export const DENO_ARGS = [
  "run",
  "--quiet",
  "--no-prompt",
  "--allow-ffi",
  "--allow-read",
  "--allow-env",
  "--allow-sys=homedir",
  join(repoRoot, "cli.ts"),
];

/** Runs the CLI with `input` on stdin (a pipe: no terminal). */
export async function cli(
  args: string[],
  input = "",
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...DENO_ARGS, ...args],
    cwd: repoRoot,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(input));
  await writer.close();
  const out = await child.output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

export interface Note {
  prefilled: number;
  cached: number;
  generated: number;
  interrupted: boolean;
}

/** The per-turn notes `dotllm chat` prints on stderr. */
export function notes(stderr: string): Note[] {
  const re =
    /\[prefill (\d+) tokens \((\d+) cached\).*?, (\d+) tokens at [^\]]*?(, interrupted)?\]/g;
  return [...stderr.matchAll(re)].map((m) => ({
    prefilled: Number(m[1]),
    cached: Number(m[2]),
    generated: Number(m[3]),
    interrupted: m[4] !== undefined,
  }));
}

/** Tokens the SmolLM2 template adds after an assistant reply for the user message `text`. */
export function nextTurnTokens(model: string, text: string): number {
  using file = openGguf(model);
  const tokenizer = Tokenizer.fromGguf(file.gguf);
  const template = chatTemplateFor(file.gguf, tokenizer);
  const reply = "@@REPLY@@";
  const rendered = template.render([
    { role: "user", content: "a" },
    { role: "assistant", content: reply },
    { role: "user", content: text },
  ]);
  const delta = rendered.slice(rendered.indexOf(reply) + reply.length);
  return tokenizer.encode(delta, { addSpecial: false, parseSpecial: true }).length;
}

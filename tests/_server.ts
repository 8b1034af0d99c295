/**
 * Starts `dotllm serve` in a subprocess on a free port of 127.0.0.1 (Deno
 * with the launcher's permissions, or Bun), waits until it listens, and stops
 * it with SIGTERM. Also: the synthetic SmolLM-shaped Q8_0 model the server
 * tests run on, and the process's resident memory.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { makeModel } from "../src/gguf/make_model.ts";
import { repoRoot, testdata } from "./_testdata.ts";

/** A running server. */
export interface ServerProcess {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  pid: number;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Resident memory in bytes (`VmRSS`). */
  rssBytes(): number;
  /** SIGTERM (default), then the exit code. */
  stop(signal?: Deno.Signal): Promise<number>;
  /** The exit code, once it exits by itself. */
  wait(): Promise<number>;
}

/** The synthetic SmolLM2-135M-shaped Q8_0 model (made into `models/` when missing). */
export function smollmQ8(): string {
  return makeModel({
    shape: "smollm-135m",
    type: "q8_0",
    outDir: join(repoRoot, "models"),
    vocabDir: testdata("vocab-converted"),
  }).path;
}

/** The real SmolLM2-135M-Instruct Q4_1 file. */
export const SMOLLM2_Q4_1 = testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf");

/** Starts `dotllm serve MODEL ARGS --port 0`; rejects with its stderr when it exits early. */
export async function startServer(
  model: string,
  args: string[] = [],
  { runtime = "deno" }: { runtime?: "deno" | "bun" } = {},
): Promise<ServerProcess> {
  const cli = join(repoRoot, "cli.ts");
  const [command, prefix] = runtime === "deno"
    ? [Deno.execPath(), [
      "run",
      "--quiet",
      "--no-prompt",
      "--allow-ffi",
      "--allow-read",
      "--allow-env",
      "--allow-sys=homedir",
      "--allow-run",
      "--allow-net",
      cli,
    ]]
    : ["bun", [cli]];
  const child = new Deno.Command(command, {
    args: [...prefix, "serve", model, "--port", "0", ...args],
    cwd: repoRoot,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let text = "";
  const decoder = new TextDecoder();
  let listening: (url: string) => void = () => {};
  const url = new Promise<string>((resolve) => (listening = resolve));
  const pump = (async () => {
    for await (const chunk of child.stderr) {
      text += decoder.decode(chunk, { stream: true });
      const m = /on (http:\/\/[^ ]+:\d+)/.exec(text);
      if (m) listening(m[1]);
    }
  })();
  const exited = child.status.then((s) => s.code);
  const first = await Promise.race([url, exited.then((code) => ({ code }))]);
  if (typeof first !== "string") {
    await pump;
    throw new Error(`dotllm serve exited with ${first.code}: ${text}`);
  }
  return {
    url: first,
    pid: child.pid,
    stderr: () => text,
    rssBytes() {
      const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
      return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
    },
    async wait() {
      const code = await exited;
      await pump;
      return code;
    },
    async stop(signal: Deno.Signal = "SIGTERM") {
      try {
        child.kill(signal);
      } catch { /* already gone */ }
      const code = await exited;
      await pump;
      return code;
    },
  };
}

/** Helpers for the hub tests: the CLI in a subprocess against a fake Hub, in a fresh cache. @module */
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { repoRoot, testdata } from "./_testdata.ts";

/** What a CLI run produced. */
export interface HubCliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The permissions of the `./dotllm` launcher. */
export const LAUNCHER_FLAGS = [
  "run",
  "--quiet",
  "--no-prompt",
  "--allow-ffi",
  "--allow-read",
  "--allow-write",
  "--allow-env",
  "--allow-net",
  "--allow-sys=homedir",
  "--allow-run",
];

/** The environment for a run: this cache home and this endpoint, no token, no offline. */
export function hubEnv(home: string, endpoint: string, extra: Record<string, string> = {}) {
  return {
    NO_COLOR: "1",
    HF_HOME: home,
    HF_HUB_CACHE: join(home, "hub"),
    HF_ENDPOINT: endpoint,
    HF_TOKEN: "",
    HF_HUB_OFFLINE: "",
    ...extra,
  };
}

/** `deno run cli.ts ARGS` as a child process (to be awaited or killed). */
export function spawnCli(args: string[], env: Record<string, string>): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [...LAUNCHER_FLAGS, join(repoRoot, "cli.ts"), ...args],
    cwd: repoRoot,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

const decoder = new TextDecoder();

/** Runs the CLI to the end. */
export async function runCli(args: string[], env: Record<string, string>): Promise<HubCliResult> {
  const out = await spawnCli(args, env).output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

/** A real GGUF (stories260K) as bytes. */
export function storiesBytes(): Uint8Array {
  return new Uint8Array(readFileSync(testdata("models", "stories260K.gguf")));
}

/** A fresh temporary HF_HOME, removed on dispose. */
export function tempHome(): { path: string } & Disposable {
  const path = Deno.makeTempDirSync({ prefix: "dotllm-hub-" });
  return { path, [Symbol.dispose]: () => Deno.removeSync(path, { recursive: true }) };
}

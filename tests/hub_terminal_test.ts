/**
 * `dotllm pull`'s progress line on a terminal (through `script`, which gives
 * the command a pseudo-terminal), and pulls under Bun (whose lock is a pid
 * file, as Bun has no file locks).
 *
 * @module
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./_testdata.ts";
import { sha256, startFakeHub } from "./_fake_hub.ts";
import { hubEnv, LAUNCHER_FLAGS, runCli, storiesBytes, tempHome } from "./_hub.ts";

const STORIES = storiesBytes();
const SCRIPT = "/usr/bin/script";

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

Deno.test("on a terminal pull draws size, speed and ETA, then one summary line; piped it prints nothing", async () => {
  assert.ok(fs.existsSync(SCRIPT), "the test needs `script` (apt-get install bsdutils)");
  await using hub = startFakeHub({
    "org/stories": { files: { "s-Q8_0.gguf": { bytes: STORIES } } },
  });
  hub.control.rateBytesPerSecond = 2_000_000; // ~0.6 s: several redraws 100 ms apart
  using home = tempHome();
  const command = [
    Deno.execPath(),
    ...LAUNCHER_FLAGS,
    join(repoRoot, "cli.ts"),
    "pull",
    "org/stories",
  ]
    .map(shellQuote).join(" ");
  const out = await new Deno.Command(SCRIPT, {
    args: ["-qec", command, "/dev/null"],
    env: { ...hubEnv(home.path, hub.url), TERM: "xterm" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const screen = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, screen);
  const lines = screen.split(/\r\n|\r|\n/).map((l) => l.trimEnd()).filter((l) => l !== "");
  const progress = lines.filter((l) => l.startsWith("dotllm: s-Q8_0.gguf "));
  assert.ok(progress.length >= 2, screen);
  for (const line of progress) {
    assert.match(
      line,
      /^dotllm: s-Q8_0\.gguf +\d+% \d+\.\d\/1\.1 MiB {2}\d+\.\d MiB\/s {2}ETA \d+s$/,
    );
  }
  assert.ok(
    lines.some((l) => /^dotllm: pulled s-Q8_0\.gguf \(1\.1 MiB in \d+\.\d s\)$/.test(l)),
    screen,
  );
  assert.ok(lines.at(-1)!.endsWith("s-Q8_0.gguf"), "the path comes last, on stdout");

  // Piped: the path and nothing else.
  using home2 = tempHome();
  const piped = await runCli(["pull", "org/stories"], hubEnv(home2.path, hub.url));
  assert.equal(piped.stderr, "");
  assert.match(piped.stdout, /\/s-Q8_0\.gguf\n$/);
});

async function runBun(args: string[], env: Record<string, string>) {
  let out;
  try {
    out = await new Deno.Command("bun", {
      args: [join(repoRoot, "cli.ts"), ...args],
      cwd: repoRoot,
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error("bun is not on PATH: run the tests with `./dotllm task test`");
    }
    throw error;
  }
  const decoder = new TextDecoder();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

Deno.test("under Bun: pull, concurrent pulls (pid-file lock), and a model found by run", async () => {
  await using hub = startFakeHub({
    "org/stories": { files: { "s-Q8_0.gguf": { bytes: STORIES } } },
  });
  hub.control.rateBytesPerSecond = 2_000_000;
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const [a, b] = await Promise.all([
    runBun(["pull", "org/stories:Q8_0"], env),
    runBun(["pull", "org/stories:Q8_0"], env),
  ]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  assert.equal(a.stdout, b.stdout);
  assert.equal(hub.cdnBytes, STORIES.length, "downloaded once");
  const blobs = join(home.path, "hub", "models--org--stories", "blobs");
  assert.deepEqual(fs.readdirSync(blobs), [sha256(STORIES)]);
  const locks = join(home.path, "hub", ".locks", "models--org--stories");
  assert.deepEqual(fs.readdirSync(locks), [], "the pid lock is removed");
  const tokens = await runBun(["tokenize", "org/stories", "-p", "Once upon a time"], env);
  assert.equal(tokens.code, 0, tokens.stderr);
  assert.match(tokens.stdout, /^\[\d+(, ?\d+)*\]\n$/);
});

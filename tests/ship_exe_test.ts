/**
 * The single executable (`deno task compile:bun`): copied alone into an empty
 * folder and run with a PATH that has no deno, bun or zig, it installs its
 * embedded library into the cache once, reuses it, and survives two
 * processes starting at once.
 */
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exec, goldenText, STORIES } from "./_ship.ts";
import { repoRoot } from "./_testdata.ts";

const PATH = "/usr/bin:/bin";

/** Every file under `dir`, with its mtime. */
function listFiles(dir: string): Map<string, number> {
  const files = new Map<string, number>();
  if (!existsSync(dir)) return files;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(path, statSync(path).mtimeMs);
  }
  return files;
}

Deno.test("the Bun single executable runs alone, caches its library once, and runs twice at once", async () => {
  for (const tool of ["deno", "bun", "zig"]) {
    for (const dir of PATH.split(":")) {
      assert.ok(!existsSync(join(dir, tool)), `${dir}/${tool} exists: the PATH must not have it`);
    }
  }
  const work = mkdtempSync(join(tmpdir(), "dotllm-exe-"));
  try {
    const built = join(work, "build", "dotllm");
    const compile = await exec(Deno.execPath(), [
      "run",
      "--quiet",
      "--allow-run",
      "--allow-read",
      "--allow-env",
      join(repoRoot, "scripts/compile.ts"),
      "bun",
      built,
    ]);
    assert.equal(compile.code, 0, compile.stderr);
    const alone = join(work, "alone");
    Deno.mkdirSync(alone);
    const exe = join(alone, "dotllm");
    copyFileSync(built, exe);
    Deno.chmodSync(exe, 0o755);
    assert.deepEqual(readdirSync(alone), ["dotllm"]);

    const expected = goldenText("Once upon a time", 64);
    const args = ["run", STORIES, "-p", "Once upon a time", "-n", "64", "--temp", "0"];
    const run = (cache: string, env: Record<string, string> = {}) =>
      exec(exe, args, {
        cwd: alone,
        clearEnv: true,
        env: { PATH, HOME: join(work, "home"), XDG_CACHE_HOME: cache, NO_COLOR: "1", ...env },
      });

    const cache = join(work, "cache");
    const first = await run(cache);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, expected);
    assert.match(first.stderr, /Generation/);
    const installed = listFiles(cache);
    // The baseline and the AVX-512 build, each under <cache>/dotllm/<version>/<sha16>/.
    assert.ok(installed.size >= 1, "the library is installed into the cache");
    for (const path of installed.keys()) {
      assert.match(path, /\/dotllm\/[^/]+\/[0-9a-f]{16}\/libdotllm-[a-z0-9_-]+\.so$/);
    }

    const second = await run(cache);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, expected);
    assert.deepEqual(listFiles(cache), installed, "the second run reuses the cached library");

    const forced = await run(cache, { DOTLLM_CPU: "baseline" });
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(forced.stdout, expected, "the baseline build gives the same text");

    const together = join(work, "cache-together");
    const both = await Promise.all([run(together), run(together)]);
    for (const out of both) {
      assert.equal(out.code, 0, out.stderr);
      assert.equal(out.stdout, expected);
    }
    assert.equal(listFiles(together).size, installed.size);
    assert.deepEqual(readdirSync(alone), ["dotllm"], "nothing is written beside the executable");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

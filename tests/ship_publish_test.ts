/**
 * `deno publish --dry-run` passes offline (empty DENO_DIR, every proxy
 * pointing at a closed port) and ships the sources plus the release libraries
 * and their manifest, which .gitignore would otherwise drop; prints the
 * package size.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { platformName, releaseFileName } from "../src/native/mod.ts";
import { buildRelease, exec } from "./_ship.ts";
import { seedNpmCache } from "./_npm_cache.ts";
import { repoRoot } from "./_testdata.ts";

Deno.test("deno publish --dry-run passes offline and ships the release libraries", async () => {
  await buildRelease(platformName());
  const denoDir = mkdtempSync(join(tmpdir(), "dotllm-publish-"));
  seedNpmCache(denoDir);
  try {
    const closed = "http://127.0.0.1:9";
    const out = await exec(Deno.execPath(), ["publish", "--dry-run", "--allow-dirty"], {
      env: { DENO_DIR: denoDir, HTTPS_PROXY: closed, HTTP_PROXY: closed, NO_COLOR: "1" },
    });
    assert.equal(out.code, 0, out.stderr + out.stdout);
    const text = out.stdout + out.stderr;
    assert.match(text, /Dry run complete/);
    const files = [...text.matchAll(/^\s+(file:\/\/\S+) \(/gm)].map((m) =>
      fileURLToPath(m[1]).slice(repoRoot.length)
    );
    for (const want of ["README.md", "deno.json", "mod.ts", "cli.ts", "src/llm/llm.ts"]) {
      assert.ok(files.includes(want), want);
    }
    const release = readdirSync(join(repoRoot, "zig-out/release")).map((f) =>
      `zig-out/release/${f}`
    );
    assert.ok(release.includes(`zig-out/release/${releaseFileName(platformName())}`));
    for (const file of release) assert.ok(files.includes(file), `${file} is published`);
    const manifest = JSON.parse(
      readFileSync(join(repoRoot, "zig-out/release/manifest.json"), "utf8"),
    );
    for (const name of Object.keys(manifest)) assert.ok(files.includes(`zig-out/release/${name}`));
    for (const file of files) {
      assert.match(
        file,
        /^(README\.md|deno\.json|mod\.ts|cli\.ts|src\/.*\.ts|zig-out\/release\/.*)$/,
      );
    }
    const bytes = files.reduce((sum, f) => sum + statSync(join(repoRoot, f)).size, 0);
    const libraries = release.filter((f) => !f.endsWith(".json")).length;
    console.log(
      `package: ${files.length} files, ${(bytes / 1024).toFixed(0)} KiB ` +
        `(${libraries} native libraries)`,
    );
  } finally {
    rmSync(denoDir, { recursive: true, force: true });
  }
});

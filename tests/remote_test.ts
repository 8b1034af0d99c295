/**
 * The package loaded over http(s), as `deno run jsr:@dotllm/cli` does: a
 * loopback server serves the package's publish files plus a release library
 * and its manifest; a fresh Deno (empty DENO_DIR, empty cache) runs it.
 */
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sha256Hex } from "../src/native/embedded.ts";
import { loadNative, platformName, releaseFileName } from "../src/native/mod.ts";
import { goldenText, STORIES } from "./_ship.ts";
import { repoRoot } from "./_testdata.ts";
import { seedNpmCache } from "./_npm_cache.ts";

/** Copies what `deno publish` would ship (the TypeScript sources) into `dir`. */
function stagePackage(dir: string): void {
  for (const entry of ["deno.json", "mod.ts", "cli.ts", "src"]) {
    cpSync(join(repoRoot, entry), join(dir, entry), { recursive: true });
  }
  // This machine's library under its release name, as `deno task release` names it.
  const library = readFileSync(loadNative().path);
  const file = releaseFileName(platformName());
  mkdirSync(join(dir, "zig-out", "release"), { recursive: true });
  writeFileSync(join(dir, "zig-out", "release", file), library);
  const manifest = { [file]: { sha256: sha256Hex(library), size_bytes: library.length } };
  writeFileSync(join(dir, "zig-out", "release", "manifest.json"), JSON.stringify(manifest));
}

function serve(dir: string): { server: Deno.HttpServer; port: number; requests: string[] } {
  const requests: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const path = decodeURIComponent(new URL(request.url).pathname);
    requests.push(path);
    if (path.includes("..")) return new Response("bad path", { status: 400 });
    try {
      const body = readFileSync(join(dir, path));
      const type = path.endsWith(".ts") ? "application/typescript" : "application/octet-stream";
      return new Response(body, { headers: { "content-type": type } });
    } catch {
      return new Response("not found", { status: 404 });
    }
  });
  return { server, port: server.addr.port, requests };
}

Deno.test("a package served over http fetches, verifies and caches its library", async () => {
  const work = mkdtempSync(join(tmpdir(), "dotllm-remote-"));
  const pkg = join(work, "pkg");
  mkdirSync(pkg);
  stagePackage(pkg);
  seedNpmCache(join(work, "deno-dir"));
  const { server, port, requests } = serve(pkg);
  try {
    const script = `
      import { loadNative, prepareLibrary } from "http://127.0.0.1:${port}/mod.ts";
      await prepareLibrary();
      const native = loadNative();
      console.log(native.path);
      console.log(native.fn.dotllm_abi_version());`;
    const env = {
      DENO_DIR: join(work, "deno-dir"),
      XDG_CACHE_HOME: join(work, "cache"),
      NO_COLOR: "1",
    };
    const run = async () => {
      const out = await new Deno.Command(Deno.execPath(), {
        cwd: work, // outside the checkout: no deno.json, no deno.lock to write
        args: ["eval", "--quiet", script],
        env,
        clearEnv: false,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, stderr);
      return new TextDecoder().decode(out.stdout).trim().split("\n");
    };
    const [path, abi] = await run();
    assert.ok(path.startsWith(join(work, "cache", "dotllm")), path);
    assert.equal(abi, String(loadNative().fn.dotllm_abi_version()));
    assert.equal(sha256Hex(readFileSync(path)), sha256Hex(readFileSync(loadNative().path)));
    const libraryFetches = requests.filter((r) => r.endsWith(releaseFileName(platformName())));
    assert.equal(libraryFetches.length, 1);
    // A second run finds the library in the cache and does not fetch it again.
    const [again] = await run();
    assert.equal(again, path);
    assert.equal(
      requests.filter((r) => r.endsWith(releaseFileName(platformName()))).length,
      1,
    );
    // A library that does not match the manifest is refused.
    writeFileSync(join(pkg, "zig-out", "release", releaseFileName(platformName())), "tampered");
    rmSync(join(work, "cache"), { recursive: true, force: true });
    const bad = await new Deno.Command(Deno.execPath(), {
      cwd: work, // outside the checkout: no deno.json, no deno.lock to write
      args: ["eval", "--quiet", script],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.notEqual(bad.code, 0);
    assert.match(new TextDecoder().decode(bad.stderr), /does not match its sha256/);
  } finally {
    await server.shutdown();
    rmSync(work, { recursive: true, force: true });
  }
});

Deno.test("deno run http://127.0.0.1:PORT/cli.ts run generates the greedy text from an empty cache", async () => {
  const work = mkdtempSync(join(tmpdir(), "dotllm-remote-run-"));
  const pkg = join(work, "pkg");
  mkdirSync(pkg);
  stagePackage(pkg);
  seedNpmCache(join(work, "deno-dir"));
  const { server, port, requests } = serve(pkg);
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      cwd: work, // outside the checkout: no deno.json, no deno.lock to write
      args: [
        "run",
        "--quiet",
        "-A",
        `http://127.0.0.1:${port}/cli.ts`,
        "run",
        STORIES,
        "-p",
        "Once upon a time",
        "-n",
        "16",
        "--temp",
        "0",
      ],
      env: {
        DENO_DIR: join(work, "deno-dir"),
        XDG_CACHE_HOME: join(work, "cache"),
        NO_COLOR: "1",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    assert.equal(new TextDecoder().decode(out.stdout), goldenText("Once upon a time", 16));
    assert.match(stderr, /Generation/);
    assert.ok(requests.includes("/cli.ts"));
    // `deno run jsr:@dotllm/cli` runs mod.ts: it starts the CLI too.
    const version = await new Deno.Command(Deno.execPath(), {
      cwd: work, // outside the checkout: no deno.json, no deno.lock to write
      args: ["run", "--quiet", "-A", `http://127.0.0.1:${port}/mod.ts`, "--version"],
      env: { DENO_DIR: join(work, "deno-dir"), XDG_CACHE_HOME: join(work, "cache") },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(version.code, 0, new TextDecoder().decode(version.stderr));
    assert.match(new TextDecoder().decode(version.stdout), /^dotllm \d+\.\d+\.\d+\n$/);
    assert.equal(requests.filter((r) => r.endsWith(releaseFileName(platformName()))).length, 1);
  } finally {
    await server.shutdown();
    rmSync(work, { recursive: true, force: true });
  }
});

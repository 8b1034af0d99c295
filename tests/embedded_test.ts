import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { installLibrary, sha256Hex } from "../src/native/embedded.ts";
import { loadNative } from "../src/native/mod.ts";

Deno.test("installLibrary writes once, reuses, and repairs a corrupt copy", () => {
  const dir = mkdtempSync(join(tmpdir(), "dotllm-cache-"));
  try {
    const bytes = readFileSync(loadNative().path);
    const path = installLibrary(bytes, "libdotllm.so", dir);
    assert.equal(sha256Hex(readFileSync(path)), sha256Hex(bytes));
    const firstWrite = statSync(path).mtimeMs;
    assert.equal(installLibrary(bytes, "libdotllm.so", dir), path);
    assert.equal(statSync(path).mtimeMs, firstWrite, "a good copy is reused, not rewritten");
    writeFileSync(path, "corrupt");
    assert.equal(installLibrary(bytes, "libdotllm.so", dir), path);
    assert.equal(sha256Hex(readFileSync(path)), sha256Hex(bytes));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("installLibrary is safe when several processes install at once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dotllm-cache-"));
  try {
    const script = `
      import { readFileSync } from "node:fs";
      import { installLibrary } from ${
      JSON.stringify(new URL("../src/native/embedded.ts", import.meta.url).href)
    };
      console.log(installLibrary(readFileSync(Deno.args[0]), "libdotllm.so", Deno.args[1]));`;
    const runs = Array.from({ length: 4 }, () =>
      new Deno.Command(Deno.execPath(), {
        args: ["eval", script, loadNative().path, dir],
        stdout: "piped",
        stderr: "piped",
      }).output());
    const outputs = await Promise.all(runs);
    const paths = outputs.map((o) => {
      assert.equal(o.code, 0, new TextDecoder().decode(o.stderr));
      return new TextDecoder().decode(o.stdout).trim();
    });
    assert.equal(new Set(paths).size, 1);
    assert.equal(sha256Hex(readFileSync(paths[0])), sha256Hex(readFileSync(loadNative().path)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

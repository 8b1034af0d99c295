import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { ABI_VERSION, loadNative } from "../src/native/mod.ts";
import { VERSION } from "../src/version.ts";
import { testdata } from "./_testdata.ts";

Deno.test("the native library loads and has our ABI version", () => {
  const native = loadNative();
  assert.equal(native.fn.dotllm_abi_version(), ABI_VERSION);
  assert.equal(native.runtime, "deno");
});

Deno.test("native buffers are aligned, zeroed and writable from JS", () => {
  const native = loadNative();
  const buffer = native.alloc(4096);
  assert.equal(buffer.address % 64, 0);
  const f = buffer.f32();
  assert.ok(f.every((x) => x === 0));
  f[1023] = 3.25;
  assert.equal(new Float32Array(native.view(buffer.address, 4096))[1023], 3.25);
  buffer.free();
  assert.throws(() => buffer.address, /after free/);
});

Deno.test("mapFile maps a model without copying and names a missing file", () => {
  const native = loadNative();
  const path = testdata("models/stories260K.gguf");
  const mapped = native.mapFile(path);
  const bytes = readFileSync(path);
  assert.equal(mapped.byteLength, bytes.length);
  assert.deepEqual(mapped.bytes.subarray(0, 4096), new Uint8Array(bytes.subarray(0, 4096)));
  mapped.close();
  assert.throws(
    () => native.mapFile("/nonexistent/x.gguf"),
    /cannot open ".*x\.gguf": no such file/,
  );
  assert.throws(() => native.mapFile(testdata("models")), /is a directory/);
});

Deno.test("VERSION equals deno.json's version", () => {
  const config = JSON.parse(readFileSync(new URL("../deno.json", import.meta.url), "utf8"));
  assert.equal(VERSION, config.version);
});

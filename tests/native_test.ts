import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Kernels } from "../src/kernels/mod.ts";
import { Context, Model } from "../src/model/mod.ts";
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

Deno.test("the library's limits are the ones the TypeScript side enforces", () => {
  const native = loadNative();
  const limits = native.limits;
  assert.equal(native.limits, limits); // read once
  for (const [name, value] of Object.entries(limits)) {
    assert.ok(Number.isSafeInteger(value) && value > 0, `${name}: ${value}`);
  }
  // The thread ceiling: one past it is refused by the kernels and by a Context,
  // with the library's number in the message.
  const over = limits.threadCountMax + 1;
  assert.throws(
    () => new Kernels(native, over),
    new RegExp(`threads must be at most ${limits.threadCountMax}, got ${over}`),
  );
  using model = Model.load(testdata("models/stories260K.gguf"));
  assert.throws(
    () => new Context(model, { threads: over, contextSize: 16 }),
    new RegExp(`threads must be an integer in \\[0, ${limits.threadCountMax}\\], got ${over}`),
  );
  // A head dimension past the library's is refused before any native call.
  using kernels = new Kernels(native, 1);
  assert.throws(
    () => kernels.rope(64, 1, 1, limits.headDimMax + 2, 2, 64, 10000, 0, false), // never dereferenced
    new RegExp(`headDim must be at most ${limits.headDimMax}`),
  );
});

/**
 * Sliding-window layers keep a ring of `window + batch − 1` rows per slot
 * (llama.cpp's iSWA cache), not the whole context; a ring forgets positions,
 * so truncating further back than `rows − window` empties the slot instead of
 * keeping a prefix whose window is gone.
 */
import assert from "node:assert/strict";
import { parseGguf } from "../src/gguf/reader.ts";
import { architectureOf, KvCache, readModelConfig } from "../src/model/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { ensureGemma } from "./_gemma.ts";

Deno.test("KvCache: sliding layers are rings of window + batch - 1 rows; full layers the context", () => {
  const native = loadNative();
  const kvDim = 8;
  const cache = new KvCache(native, { layers: 3, kvDim }, {
    slots: 2,
    slotRows: 32,
    cacheType: "f16",
    windows: [4, 0, 4],
    batchSize: 3,
  });
  try {
    assert.deepEqual(Array.from(cache.layerRows), [6, 32, 6]);
    assert.equal(cache.byteLength, 2 * 2 * (6 + 32 + 6) * kvDim * 2); // K+V, 2 slots, F16
    // Layers are laid out back to back, each [slots][rows][kvDim].
    assert.equal(cache.kAddress(1) - cache.kAddress(0), 2 * 6 * kvDim * 2);
    assert.equal(cache.kAddress(2) - cache.kAddress(1), 2 * 32 * kvDim * 2);

    for (let i = 0; i < 10; i++) cache.append(0, 100 + i);
    // The ring of 6 holds positions 4..9; back to 8 keeps 4..7, the window (4) before 8.
    assert.equal(cache.truncate(0, 8), 8);
    cache.append(0, 200);
    cache.append(0, 201);
    // Back 3 (to 7) would need positions 3..6; position 3 was overwritten by 9: emptied.
    assert.equal(cache.truncate(0, 7), 0);
    assert.equal(cache.length(0), 0);
    assert.equal(cache.length(1), 0);
  } finally {
    cache.free();
  }
});

Deno.test("KvCache: without windows every layer holds the context and any prefix is kept", () => {
  const native = loadNative();
  const cache = new KvCache(native, { layers: 2, kvDim: 4 }, {
    slots: 1,
    slotRows: 16,
    cacheType: "f32",
  });
  try {
    assert.deepEqual(Array.from(cache.layerRows), [16, 16]);
    for (let i = 0; i < 12; i++) cache.append(0, i);
    assert.equal(cache.truncate(0, 1), 1);
    assert.deepEqual(Array.from(cache.history(0)), [0]);
  } finally {
    cache.free();
  }
});

Deno.test("KvCache: Gemma 3 270M at -c 8192 holds no more than llama.cpp's iSWA cache (39 MiB)", () => {
  const native = loadNative();
  const file = native.mapFile(ensureGemma());
  try {
    const gguf = parseGguf(file.bytes);
    const config = readModelConfig(gguf);
    const arch = architectureOf(config.architecture);
    const windows = Array.from(
      { length: config.blockCount },
      (_, l) => arch.layerWindow(config, l),
    );
    assert.equal(windows.filter((w) => w === 512).length, 15);
    const cache = new KvCache(native, { layers: config.blockCount, kvDim: 256 }, {
      slots: 1,
      slotRows: 8192,
      cacheType: "f16",
      windows,
      batchSize: 512,
    });
    try {
      // llama.cpp (reference build, llama-cli/-server defaults, swa_full off) reports at load:
      // "size = 24.00 MiB (8192 cells, 3 layers)" and "size = 15.00 MiB (1024 cells, 15 layers)".
      const llamaCppBytes = (24 + 15) * 2 ** 20;
      assert.equal(cache.byteLength, 2 * 2 * 256 * (3 * 8192 + 15 * 1023));
      assert.ok(cache.byteLength <= llamaCppBytes, `${cache.byteLength} > ${llamaCppBytes}`);
    } finally {
      cache.free();
    }
  } finally {
    file.close();
  }
});

import assert from "node:assert/strict";
import { Kernels } from "../src/kernels/mod.ts";
import { loadNative } from "../src/native/mod.ts";

const native = loadNative();

Deno.test("threads 0 means every CPU of the affinity mask", () => {
  using k = new Kernels(native);
  assert.equal(k.threadCount, Kernels.cpuCount(native));
  assert.ok(k.threadCount >= 1);
  assert.throws(() => new Kernels(native, -1), RangeError);
  assert.throws(() => new Kernels(native, 257), RangeError);
});

Deno.test("10,000 tiny dispatches complete (as many threads as CPUs, and oversubscribed)", () => {
  for (const threads of [Kernels.cpuCount(native), 2 * Kernels.cpuCount(native) + 1]) {
    using k = new Kernels(native, threads);
    for (let i = 0; i < 10_000; i++) k.noop();
  }
});

Deno.test("a pool is created and destroyed 100 times", () => {
  for (let i = 0; i < 100; i++) {
    const k = new Kernels(native, 1 + (i % 8));
    assert.equal(k.threadCount, 1 + (i % 8));
    k.noop();
    k.close();
    k.close(); // twice is a no-op
  }
});

Deno.test("a worker that panics is reported as an error; the pool keeps working and shuts down", () => {
  // Through the raw exports: Kernels has no way to make a worker panic.
  const pool = native.fn.dotllm_pool_create(3);
  assert.notEqual(pool, 0);
  for (let i = 0; i < 3; i++) assert.equal(native.fn.dotllm_pool_panic_test(pool), 1);
  assert.equal(native.fn.dotllm_pool_noop(pool), 0); // the next dispatch succeeds
  native.fn.dotllm_pool_destroy(pool); // joins every worker, the panicked ones too
});

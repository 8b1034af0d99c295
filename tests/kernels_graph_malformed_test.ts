/**
 * Malformed ops handed straight to `dotllm_graph_run` (bypassing the encoders'
 * checks) in the library the tests load — `zig build`'s ReleaseFast build — come
 * back as error codes; nothing runs and nothing crashes.
 */
import assert from "node:assert/strict";
import { GRAPH_ERRORS } from "../src/kernels/_graph.ts";
import { loadNative } from "../src/native/mod.ts";

const native = loadNative();

/** One 128-byte op: code, type, then u64 fields (bigint so 2^62 is exact). */
function op(code: number, type: number, fields: readonly bigint[]): Uint8Array {
  const bytes = new Uint8Array(128);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, code, true);
  view.setUint32(4, type, true);
  fields.forEach((f, i) => view.setBigUint64(8 + 8 * i, f, true));
  return bytes;
}

Deno.test("dotllm_graph_run refuses malformed ops with error codes and runs nothing", () => {
  const pool = native.fn.dotllm_pool_create(2);
  using data = native.alloc(4096);
  const x = BigInt(data.address);
  const f = data.f32();
  f.fill(1);
  // add x += x over 16 floats: would change `data` if anything ran.
  const good = op(7, 0, [x, x, x, 16n]);
  const huge = 1n << 62n;
  const cases: [string, Uint8Array, number][] = [
    ["unknown op code", op(99, 0, []), -1],
    ["unknown weight type", op(1, 77, [x, x, x, 1n, 32n, 1n]), -2],
    ["rows × cols overflow", op(1, 0, [x, x, x, huge, huge, 1n]), -3],
    ["2^62 tokens", op(1, 0, [x, x, x, 1n, 32n, huge]), -3],
    ["2^62 elements added", op(7, 0, [x, x, x, huge]), -3],
    ["Q8_0 row not a whole block", op(1, 8, [x, x, x, 1n, 33n, 1n]), -3],
    ["null output", op(1, 0, [0n, x, x, 1n, 1n, 1n]), -4],
    ["KV cache of type Q4_K (not a cache type)", op(4, 12, [x, x, x, x, 1n, 32n, 4n, 1n]), -2],
    ["Q8_0 KV cache rows not a whole block", op(4, 8, [x, x, x, x, 1n, 8n, 4n, 1n]), -3],
    ["geglu of 2^62 elements", op(9, 0, [x, x, x, huge]), -3],
    ["add_rows rows × n overflow", op(10, 0, [x, x, x, 1n << 31n, 1n << 31n]), -3],
    ["add_rows null bias", op(10, 0, [x, x, 0n, 1n, 16n]), -4],
    ["scale by NaN", op(11, 0, [x, x, 16n, 0x7ff8000000000000n]), -3],
  ];
  try {
    for (const [what, bad, code] of cases) {
      using ops = native.alloc(256);
      ops.bytes().set(good, 0);
      ops.bytes().set(bad, 128);
      const status = native.fn.dotllm_graph_run(pool, ops.address, 2);
      assert.equal(status, code, `${what}: ${GRAPH_ERRORS[status] ?? status}`);
      assert.ok(f.every((v) => v === 1), `${what}: an op ran`);
    }
    using ops = native.alloc(128);
    ops.bytes().set(good);
    assert.equal(native.fn.dotllm_graph_run(pool, ops.address, 1 << 20), -7);
    assert.equal(native.fn.dotllm_graph_run(pool, ops.address, 1), 0);
    assert.ok(f.subarray(0, 16).every((v) => v === 2), "the good op runs alone");
  } finally {
    native.fn.dotllm_pool_destroy(pool);
  }
});

/**
 * Kernel benchmarks (mitata): GEMV and GEMM of 4096×4096 weights in every computable
 * type (read from the library's type table; random weights quantized by ggml's reference
 * quantizer), decode attention, and the pool's dispatch+join of an empty job, at 1 and 2
 * threads.
 *
 *   deno task bench:kernels                     a table
 *   deno task bench:kernels --json              [{name, threads, mean_us, gbps, gflops}]
 *   deno task bench:kernels --types q4_0,q4_k   only these weight types
 *   deno task bench:kernels --filter gemv       only kernels whose name contains this
 *
 * GB/s counts the weight bytes streamed (GEMV); GFLOP/s counts 2·M·K·N (GEMM, attention).
 * Both come from mitata's mean wall time. The table adds the CPU time per call
 * (`process.cpuUsage`, all threads), a steadier figure when other processes share the CPUs.
 *
 * @module
 */
import { parseArgs } from "node:util";
import process from "node:process";
import { bench, do_not_optimize, run } from "mitata";
import { computableTypes, Kernels, quantizeRow, rowBytes } from "../src/kernels/mod.ts";
import { GgmlType } from "../src/gguf/mod.ts";
import { loadNative, type NativeBuffer } from "../src/native/mod.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    json: { type: "boolean", default: false },
    threads: { type: "string", default: "1,2" },
    filter: { type: "string", default: "" },
    types: { type: "string", default: "" },
  },
});

const native = loadNative();
const threadCounts = values.threads.split(",").map(Number);
const M = 4096;
const K = 4096;
const N = 64;

function random(n: number, seed: number): Float32Array {
  let a = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    a = (Math.imul(a, 1664525) + 1013904223) >>> 0;
    out[i] = a / 2 ** 31 - 1;
  }
  return out;
}

/** 4096×4096 random weights in `type`, quantized row by row with ggml's reference quantizer. */
function weights(type: number): NativeBuffer {
  const w = random(M * K, 1);
  if (type === GgmlType.F16) {
    const b = native.alloc(M * K * 2);
    new Float16Array(b.buffer).set(w);
    return b;
  }
  if (type === GgmlType.F32) {
    const b = native.alloc(M * K * 4);
    b.f32().set(w);
    return b;
  }
  const rowSize = rowBytes(native, type, K);
  const b = native.alloc(M * rowSize);
  const bytes = b.bytes();
  // One quantizer call per 256 rows: fewer FFI crossings, same bytes as row by row.
  const rowsPerCall = 256;
  for (let r = 0; r < M; r += rowsPerCall) {
    const q = quantizeRow(native, type, w.subarray(r * K, (r + rowsPerCall) * K));
    bytes.set(q, r * rowSize);
  }
  return b;
}

interface Case {
  name: string;
  threads: number;
  run: () => void;
  bytes?: number;
  flops?: number;
}

const cases: Case[] = [];
const pools = new Map(threadCounts.map((n) => [n, new Kernels(native, n)]));
for (const k of pools.values()) k.reserve(N, K);

const x = native.alloc(N * K * 4);
x.f32().set(random(N * K, 2));
const out = native.alloc(N * M * 4);
// Every type the library computes (its own type table), in ggml id order.
const typeNames: Array<[number, string, number]> = [...computableTypes(native).values()]
  .filter((t) => values.types === "" || values.types.split(",").includes(t.name.toLowerCase()))
  .map((t) => [t.id, t.name.toLowerCase(), rowBytes(native, t.id, K) * M]);
for (const [type, typeName, bytes] of typeNames) {
  const w = weights(type);
  for (const [threads, k] of pools) {
    cases.push({
      name: `gemv ${typeName} ${M}x${K}`,
      threads,
      bytes,
      flops: 2 * M * K,
      run: () => k.matmul(type, out.address, w.address, x.address, M, K, 1),
    });
    cases.push({
      name: `gemm ${typeName} ${M}x${K} n=${N}`,
      threads,
      bytes,
      flops: 2 * M * K * N,
      run: () => k.matmul(type, out.address, w.address, x.address, M, K, N),
    });
  }
}

// Decode attention: 32 heads, 8 KV heads, head_dim 64, 128 cached positions.
const heads = 32, kvHeads = 8, headDim = 64, seq = 128;
const q = native.alloc(heads * headDim * 4);
q.f32().set(random(heads * headDim, 3));
const attnOut = native.alloc(heads * headDim * 4);
const lastPosition = native.alloc(4);
new Int32Array(lastPosition.buffer)[0] = seq - 1;
const slotZero = native.alloc(4);
for (
  const [cacheType, cacheName, size] of [[GgmlType.F16, "f16", 2], [
    GgmlType.F32,
    "f32",
    4,
  ]] as Array<
    [number, string, number]
  >
) {
  const kc = native.alloc(seq * kvHeads * headDim * size);
  const vc = native.alloc(seq * kvHeads * headDim * size);
  const kv = random(seq * kvHeads * headDim, 4);
  if (size === 2) {
    new Float16Array(kc.buffer).set(kv);
    new Float16Array(vc.buffer).set(kv);
  } else {
    kc.f32().set(kv);
    vc.f32().set(kv);
  }
  for (const [threads, k] of pools) {
    cases.push({
      name: `attention ${cacheName} h32 kv8 d64 seq${seq}`,
      threads,
      flops: 4 * heads * headDim * seq,
      run: () =>
        k.attention(
          cacheType,
          attnOut.address,
          q.address,
          kc.address,
          vc.address,
          1,
          lastPosition.address,
          slotZero.address,
          heads,
          kvHeads,
          headDim,
          1 / 8,
          seq,
          0,
          1,
        ),
    });
  }
}

for (const [threads, k] of pools) {
  cases.push({ name: "pool dispatch+join (hot)", threads, run: () => k.noop() });
}

const selected = cases.filter((c) => c.name.includes(values.filter));
for (const c of selected) {
  bench(`${c.name} t${c.threads}`, () => {
    c.run();
    do_not_optimize(out);
  });
}
const result = await run({ format: "quiet" } as never) as unknown as {
  benchmarks: Array<{ runs: Array<{ stats?: { avg: number } }> }>;
};

interface Row {
  name: string;
  threads: number;
  mean_us: number;
  gbps: number | null;
  gflops: number | null;
}

/**
 * CPU time per call (this process, every thread): on a shared, noisy machine it shows
 * what the kernel costs when it gets the CPU. At 2 threads it includes spinning.
 */
function cpuMicros(run: () => void, wallUs: number): number {
  const calls = Math.max(3, Math.min(2000, Math.round(300_000 / Math.max(wallUs, 1))));
  run();
  const start = process.cpuUsage();
  for (let i = 0; i < calls; i++) run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / calls;
}

const cpu: number[] = [];
const rows: Row[] = selected.map((c, i) => {
  const ns = result.benchmarks[i].runs[0].stats!.avg;
  cpu.push(cpuMicros(c.run, ns / 1000));
  return {
    name: c.name,
    threads: c.threads,
    mean_us: ns / 1000,
    gbps: c.bytes !== undefined ? c.bytes / ns : null,
    gflops: c.flops !== undefined ? c.flops / ns : null,
  };
});

// Dispatch after the workers parked: sleep past the spin window, then time one dispatch.
function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
if ("pool dispatch+join (after parking)".includes(values.filter)) {
  for (const [threads, k] of pools) {
    const samples: number[] = [];
    for (let i = 0; i < 200; i++) {
      sleepMs(3);
      const start = process.hrtime.bigint();
      k.noop();
      samples.push(Number(process.hrtime.bigint() - start));
    }
    const mean = samples.reduce((s, v) => s + v, 0) / samples.length;
    rows.push({
      name: "pool dispatch+join (after parking)",
      threads,
      mean_us: mean / 1000,
      gbps: null,
      gflops: null,
    });
    cpu.push(Number.NaN);
  }
}

if (values.json) {
  console.log(JSON.stringify(rows, null, 2));
} else {
  const fmt = (v: number | null, digits: number) => (v === null ? "" : v.toFixed(digits));
  const table = [["kernel", "threads", "mean µs", "GB/s", "GFLOP/s", "cpu µs/call"]];
  for (const [i, r] of rows.entries()) {
    const cpuUs = Number.isNaN(cpu[i]) ? null : cpu[i];
    table.push([
      r.name,
      String(r.threads),
      fmt(r.mean_us, 2),
      fmt(r.gbps, 1),
      fmt(r.gflops, 1),
      fmt(cpuUs, 2),
    ]);
  }
  const widths = table[0].map((_, col) => Math.max(...table.map((row) => row[col].length)));
  for (const [i, row] of table.entries()) {
    console.log(
      row.map((cell, col) => (col === 0 ? cell.padEnd(widths[col]) : cell.padStart(widths[col])))
        .join("  "),
    );
    if (i === 0) console.log(widths.map((w) => "-".repeat(w)).join("  "));
  }
}
for (const k of pools.values()) k.close();

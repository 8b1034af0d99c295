/**
 * The AVX2 kernels on an AVX-512 host: every other kernel test loads the
 * checkout's native build, which on this machine takes the AVX-512 paths, so
 * the x86-64-v3 (AVX2) code that the baseline release library ships would go
 * unchecked. Here the kernel comparisons (SIMD against the scalar references,
 * bit-identity across threads, graph against single ops) run again on the
 * x86-64-v3 library: the TypeScript ones with `DOTLLM_LIB` naming the
 * baseline release build, the Zig unit tests compiled with `-Dcpu=x86_64_v3`.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import process from "node:process";
import { CpuFeature, loadNative, platformName, releaseFileName } from "../src/native/mod.ts";
import { buildRelease, exec } from "./_ship.ts";
import { repoRoot } from "./_testdata.ts";

const hasAvx512 = process.arch === "x64" &&
  (loadNative().fn.dotllm_cpu_features() & CpuFeature.avx512) !== 0;

/** The kernel tests that compare SIMD kernels with references through the library. */
const KERNEL_TESTS = [
  "tests/kernels_matmul_test.ts",
  "tests/kernels_ops_test.ts",
  "tests/kernels_graph_test.ts",
];

Deno.test({
  name: "the x86-64-v3 (AVX2) library passes the kernel comparisons on an AVX-512 host",
  ignore: !hasAvx512,
  async fn() {
    await buildRelease(platformName());
    const lib = join(repoRoot, "zig-out", "release", releaseFileName(platformName()));
    const env = { DOTLLM_LIB: lib, NO_COLOR: "1" };

    // The library under test is the AVX2 build: no AVX-512 compiled in.
    const probe = `import { loadNative } from ${JSON.stringify(join(repoRoot, "mod.ts"))};
      const n = loadNative();
      console.log(n.path, (n.fn.dotllm_cpu_features() >> 16) & 1);`;
    const loaded = await exec(Deno.execPath(), ["eval", "--quiet", probe], { env });
    assert.equal(loaded.code, 0, loaded.stderr);
    assert.equal(loaded.stdout.trim(), `${lib} 0`);

    const args = ["test", "--allow-all", "--no-prompt", ...KERNEL_TESTS];
    const ts = await exec(Deno.execPath(), args, { env });
    const summary = /(ok|FAILED) \| (\d+) passed \| (\d+) failed/.exec(ts.stdout);
    assert.ok(summary, ts.stdout + ts.stderr);
    assert.equal(ts.code, 0, ts.stdout.slice(-4000) + ts.stderr);
    assert.equal(summary[3], "0");
    assert.ok(Number(summary[2]) >= KERNEL_TESTS.length, summary[0]);

    const zig = await exec("zig", ["build", "test", "-Dcpu=x86_64_v3", "--summary", "all"]);
    assert.equal(zig.code, 0, zig.stdout + zig.stderr.slice(-4000));
    const passed = /(\d+)\/(\d+) tests passed/.exec(zig.stdout + zig.stderr);
    assert.ok(passed && Number(passed[1]) > 0 && passed[1] === passed[2], zig.stderr.slice(-2000));
  },
});

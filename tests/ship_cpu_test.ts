/**
 * The x86-64 release pair: the baseline (x86-64-v3, AVX2) build forced with
 * `DOTLLM_CPU=baseline` gives the same tokens as the AVX-512 build on this
 * AVX-512 machine. Runs a staged package (sources + `zig-out/release`, no
 * `zig-out/lib`), so the locator picks the release builds as a user's would.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { makeModel } from "../src/gguf/make_model.ts";
import { CpuFeature, loadNative, platformName } from "../src/native/mod.ts";
import { buildRelease, exec, stagePackage, STORIES } from "./_ship.ts";
import { testdata } from "./_testdata.ts";

const hasAvx512 = process.arch === "x64" &&
  (loadNative().fn.dotllm_cpu_features() & CpuFeature.avx512vnni) !== 0;

Deno.test({
  name: "the forced baseline (AVX2) build gives the AVX-512 build's tokens",
  ignore: !hasAvx512,
  async fn() {
    await buildRelease(platformName());
    const work = mkdtempSync(join(tmpdir(), "dotllm-cpu-"));
    try {
      const pkg = join(work, "pkg");
      mkdirSync(pkg);
      stagePackage(pkg, true);
      const tiny = makeModel({
        shape: "tiny",
        type: "q8_0",
        outDir: join(work, "models"),
        vocabDir: testdata("vocab-converted"),
      }).path;
      const env = (cpu: string) => ({
        DOTLLM_CPU: cpu,
        DOTLLM_LIB: "",
        XDG_CACHE_HOME: join(work, "cache"),
        NO_COLOR: "1",
      });
      const deno = [Deno.execPath(), "run", "--quiet", "-A"];

      // Which build each setting loads: the file name and the compiled-in AVX-512 bit.
      const probe = `import { loadNative } from ${JSON.stringify(join(pkg, "mod.ts"))};
        const n = loadNative();
        console.log(n.path, (n.fn.dotllm_cpu_features() >> 16) & 1);`;
      for (
        const [cpu, file, built] of [["baseline", "x86_64.so", "0"], ["avx512", "avx512.so", "1"]]
      ) {
        const out = await exec(Deno.execPath(), ["eval", "--quiet", probe], { env: env(cpu) });
        assert.equal(out.code, 0, out.stderr);
        const [path, bit] = out.stdout.trim().split(" ");
        assert.ok(path.startsWith(join(pkg, "zig-out", "release")), path);
        assert.ok(path.endsWith(file), path);
        assert.equal(bit, built, `${cpu}: built with AVX-512`);
      }

      for (const [model, n] of [[STORIES, "64"], [tiny, "48"]]) {
        const tokens: Record<string, number[]> = {};
        for (const cpu of ["baseline", "avx512"]) {
          const args = ["run", model, "-p", "Once upon a time", "-n", n, "--temp", "0", "--json"];
          const out = await exec(deno[0], [...deno.slice(1), join(pkg, "cli.ts"), ...args, "-q"], {
            env: env(cpu),
          });
          assert.equal(out.code, 0, out.stderr);
          tokens[cpu] = JSON.parse(out.stdout).tokens;
        }
        assert.equal(tokens.baseline.length, Number(n), model);
        assert.deepEqual(tokens.baseline, tokens.avx512, model);
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  },
});

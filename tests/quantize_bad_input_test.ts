/**
 * `dotllm quantize` on bad input: one clear line on stderr, exit 1 (2 for a
 * usage error), and nothing at OUT (no temporary file left either).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runDeno } from "./_cli.ts";
import { ladderF32 } from "./_quant_ladder.ts";
import { repoRoot } from "./_testdata.ts";
import { encodeGguf, type GgufWriteTensor, meta } from "../src/gguf/writer.ts";
import { parseQuantType } from "../src/quantize/ftype.ts";
import { QuantizeError } from "../src/quantize/plan.ts";
import { quantizeFile } from "../src/quantize/quantize.ts";
import { parseGguf } from "../src/gguf/reader.ts";
import { readFileSync } from "node:fs";

/** A small Llama-shaped GGUF: the given tensors (F32 data, or raw bytes). */
function tinyModel(
  tensors: Array<GgufWriteTensor & { data?: Float32Array | Uint8Array }>,
): Uint8Array {
  const metadata: Array<[string, ReturnType<typeof meta.u32>]> = [
    ["general.architecture", meta.string("llama")],
    ["llama.block_count", meta.u32(1)],
    ["llama.attention.head_count", meta.u32(4)],
  ];
  return encodeGguf(
    { metadata, tensors },
    tensors.map((t) => t.data ?? new Float32Array(t.dims.reduce((a, b) => a * b, 1)).fill(0.5)),
  );
}

function withDir(body: (dir: string) => Promise<void> | void): () => Promise<void> {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), "dotllm-quantize-"));
    try {
      await body(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** Runs the CLI, expects `code` and one stderr line matching `pattern`, and no OUT. */
async function expectFailure(
  args: string[],
  out: string,
  code: number,
  pattern: RegExp,
): Promise<void> {
  const result = await runDeno(["quantize", ...args]);
  assert.equal(result.code, code, result.stderr);
  assert.equal(result.stdout, "");
  const lines = result.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, `one line: ${result.stderr}`);
  assert.match(lines[0], /^dotllm: /);
  assert.match(lines[0], pattern);
  assert.ok(!existsSync(out), "nothing written to OUT");
  const dir = join(out, "..");
  if (existsSync(dir)) {
    assert.deepEqual(readdirSync(dir).filter((f) => f.includes(".tmp-")), [], "no temporary file");
  }
}

const good = [
  { name: "token_embd.weight", dims: [64, 8], type: 0 },
  { name: "blk.0.attn_norm.weight", dims: [64], type: 0 },
  { name: "blk.0.ffn_up.weight", dims: [64, 16], type: 0 },
];

Deno.test(
  "quantize: an unknown or unsupported type is a usage error (exit 2)",
  withDir(async (dir) => {
    const input = join(dir, "in.gguf");
    writeFileSync(input, tinyModel(good));
    const out = join(dir, "out.gguf");
    await expectFailure([input, out, "Q9_9"], out, 2, /unknown quantization type "Q9_9"/);
    await expectFailure([input, out, "IQ2_XXS"], out, 2, /IQ2_XXS is not supported/);
    await expectFailure([input, out], out, 2, /missing TYPE/);
    await expectFailure([input, out, "Q8_0", "many"], out, 2, /invalid THREADS "many"/);
    await expectFailure(
      ["--output-tensor-type", "q7_7", input, out, "Q8_0"],
      out,
      2,
      /--output-tensor-type: unknown ggml type "q7_7"/,
    );
  }),
);

Deno.test(
  "quantize: a tensor whose type cannot be computed fails with exit 1",
  withDir(async (dir) => {
    const input = join(dir, "in.gguf");
    // IQ2_XXS (id 16, 66 bytes per 256): dotllm neither reads nor writes it.
    writeFileSync(
      input,
      tinyModel([...good, {
        name: "blk.0.ffn_down.weight",
        dims: [256, 2],
        type: 16,
        data: new Uint8Array(132),
      }]),
    );
    const out = join(dir, "out.gguf");
    await expectFailure(
      [input, out, "Q8_0"],
      out,
      1,
      /tensor "blk\.0\.ffn_down\.weight" is IQ2_XXS: requantizing needs --allow-requantize/,
    );
    await expectFailure(
      ["--allow-requantize", input, out, "Q8_0"],
      out,
      1,
      /tensor "blk\.0\.ffn_down\.weight" is IQ2_XXS, which dotllm cannot dequantize/,
    );
    // An I32 matrix named like a weight: not quantized data, not convertible either.
    writeFileSync(
      input,
      tinyModel([...good, {
        name: "blk.0.ffn_down.weight",
        dims: [32, 2],
        type: 26,
        data: new Uint8Array(256),
      }]),
    );
    await expectFailure([input, out, "Q8_0"], out, 1, /is I32, which dotllm cannot dequantize/);
  }),
);

Deno.test(
  "quantize: block-misaligned rows fail with exit 1",
  withDir(async (dir) => {
    const input = join(dir, "in.gguf");
    const out = join(dir, "out.gguf");
    // A forced type that does not fit the row (no fallback applies to forced types).
    writeFileSync(
      input,
      tinyModel([{ name: "token_embd.weight", dims: [48, 4], type: 0 }, ...good.slice(1)]),
    );
    await expectFailure(
      ["--token-embedding-type", "q8_0", input, out, "Q8_0"],
      out,
      1,
      /tensor "token_embd\.weight": row of 48 is not a multiple of Q8_0's block of 32/,
    );
    // A file whose Q8_0 tensor claims a 48-element row.
    const bytes = tinyModel(good);
    const gguf = parseGguf(bytes);
    const info = gguf.tensorsByName.get("blk.0.ffn_up.weight")!;
    // Find the tensor info's type field (u32 after the dims) and its first dim, and patch both.
    const nameBytes = new TextEncoder().encode(info.name);
    let at = -1;
    for (let i = 0; i < bytes.length - nameBytes.length; i++) {
      if (nameBytes.every((b, j) => bytes[i + j] === b)) {
        at = i;
        break;
      }
    }
    const view = new DataView(bytes.buffer);
    const dimsAt = at + nameBytes.length + 4;
    view.setBigUint64(dimsAt, 48n, true);
    view.setUint32(dimsAt + 16, 8, true); // Q8_0
    writeFileSync(input, bytes);
    await expectFailure(
      [input, out, "F16"],
      out,
      1,
      /row of 48 is not a multiple of Q8_0's block of 32/,
    );
  }),
);

Deno.test(
  "quantize: files that cannot be read, invalid data, requantizing, same file",
  withDir(async (dir) => {
    const out = join(dir, "out.gguf");
    await expectFailure(
      [join(dir, "missing.gguf"), out, "Q8_0"],
      out,
      1,
      /missing\.gguf: cannot open: no such file/,
    );
    const junk = join(dir, "junk.gguf");
    writeFileSync(junk, "not a model at all, just some text");
    await expectFailure([junk, out, "Q8_0"], out, 1, /junk\.gguf: not a GGUF file/);
    const nan = join(dir, "nan.gguf");
    const data = new Float32Array(64 * 16).fill(0.25);
    data[70] = NaN;
    writeFileSync(nan, tinyModel([...good.slice(0, 2), { ...good[2], data }]));
    await expectFailure(
      [nan, out, "Q8_0"],
      out,
      1,
      /tensor "blk\.0\.ffn_up\.weight" has invalid data \(row 0 on: NaN at element 70\)/,
    );
    const q8 = join(dir, "q8.gguf");
    writeFileSync(join(dir, "f32.gguf"), tinyModel(good));
    const ok = await runDeno(["quantize", join(dir, "f32.gguf"), q8, "Q8_0"]);
    assert.equal(ok.code, 0, ok.stderr);
    await expectFailure(
      [q8, out, "Q4_0"],
      out,
      1,
      /is Q8_0: requantizing needs --allow-requantize/,
    );
    const same = await runDeno(["quantize", q8, q8, "Q8_0"]);
    assert.equal(same.code, 1);
    assert.match(same.stderr, /input and output are the same file/);
    mkdirSync(join(dir, "a-directory"));
    const dirResult = await runDeno([
      "quantize",
      join(dir, "f32.gguf"),
      join(dir, "a-directory"),
      "Q8_0",
    ]);
    assert.equal(dirResult.code, 1);
    assert.match(dirResult.stderr, /^dotllm: cannot write .*a-directory: is a directory\n$/);
    assert.deepEqual(readdirSync(join(dir, "a-directory")), []);
    assert.ok(!readdirSync(dir).some((f) => f.includes(".tmp-")));
    await expectFailure(
      [join(dir, "f32.gguf"), join(dir, "no", "dir.gguf"), "Q8_0"],
      join(dir, "no", "dir.gguf"),
      1,
      /cannot create .*dir\.gguf: no such file or directory/,
    );
  }),
);

/** Mounts a 64 KiB tmpfs at `dir` (root only); false where that is not allowed. */
function mountSmallFs(dir: string): boolean {
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

Deno.test(
  "quantize: a full disk fails with one line and leaves nothing behind",
  withDir(async (dir) => {
    const input = join(dir, "in.gguf");
    // ~1 MiB of F32: its F16 output (~0.5 MiB) cannot fit in 64 KiB.
    writeFileSync(
      input,
      tinyModel([...good.slice(0, 2), { name: "blk.0.ffn_up.weight", dims: [512, 512], type: 0 }]),
    );
    const small = join(dir, "small");
    mkdirSync(small);
    // The writes fail as a full disk's do (everywhere, root or not)...
    const out = join(small, "out.gguf");
    let written = 0;
    const fullAt = 64 << 10;
    await assert.rejects(
      () =>
        quantizeFile(input, out, { type: parseQuantType("F16")! }, undefined, {
          writeSync(_fd, bytes) {
            if (written + bytes.length > fullAt) {
              throw Object.assign(new Error("ENOSPC: no space left on device, write"), {
                code: "ENOSPC",
              });
            }
            written += bytes.length;
            return bytes.length;
          },
        }),
      (e: unknown) =>
        e instanceof QuantizeError && /no space left on device/.test(e.message) &&
        !e.message.includes("\n"),
    );
    assert.deepEqual(readdirSync(small), []);
    // ...and, where a 64 KiB tmpfs can be mounted (root), a real full disk through the CLI.
    if (!mountSmallFs(small)) {
      console.log("no tmpfs mount allowed here: the real full-disk run is not possible");
      return;
    }
    try {
      await expectFailure(
        [input, out, "F16"],
        out,
        1,
        /cannot write .*out\.gguf: no space left on device/,
      );
      assert.deepEqual(readdirSync(small), []);
    } finally {
      execFileSync("umount", [small]);
    }
  }),
);

Deno.test(
  "quantize: a good run writes a parseable file with llama-quantize's keys last",
  withDir(async (dir) => {
    const input = join(dir, "in.gguf");
    writeFileSync(input, tinyModel(good));
    const out = join(dir, "out.gguf");
    const result = await runDeno(["quantize", "--json", input, out, "Q8_0", "2"]);
    assert.equal(result.code, 0, result.stderr);
    const doc = JSON.parse(result.stdout);
    assert.equal(doc.file_type, 7);
    assert.deepEqual(doc.tensors.map((t: { to: string }) => t.to), ["Q8_0", "F32", "Q8_0"]);
    const gguf = parseGguf(readFileSync(out));
    const keys = [...gguf.metadata.keys()];
    assert.deepEqual(keys.slice(-2), ["general.quantization_version", "general.file_type"]);
    assert.equal(gguf.metadata.get("general.file_type"), 7);
    assert.deepEqual(gguf.tensors.map((t) => t.name), good.map((t) => t.name));
    assert.equal(readFileSync(out).length, doc.size_bytes);
    // llama-quantize's `IN TYPE` form: OUT is <dir of IN>/ggml-model-<TYPE>.gguf.
    const auto = await runDeno(["quantize", input, "q8_0"]);
    assert.equal(auto.code, 0, auto.stderr);
    assert.deepEqual(readFileSync(join(dir, "ggml-model-Q8_0.gguf")), readFileSync(out));
    // --dry-run writes nothing and lists every tensor.
    const dry = await runDeno(["quantize", "--dry-run", input, join(dir, "dry.gguf"), "Q4_K_M"]);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /^blk\.0\.ffn_up\.weight +f32 -> q5_0 +64 x 16$/m);
    assert.ok(!existsSync(join(dir, "dry.gguf")));
  }),
);

Deno.test(
  "quantize: Ctrl-C mid-file exits 130 and leaves nothing at OUT",
  withDir(async (dir) => {
    const input = await ladderF32();
    const out = join(dir, "out.gguf");
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", join(repoRoot, "cli.ts"), "quantize", input, out, "Q6_K", "1"],
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    // Wait until the temporary file exists: the conversion is under way.
    const started = Date.now();
    while (!readdirSync(dir).some((f) => f.includes(".tmp-")) && Date.now() - started < 60_000) {
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill("SIGINT");
    const result = await child.output();
    const stderr = new TextDecoder().decode(result.stderr);
    assert.equal(result.code, 130, stderr);
    assert.match(stderr, /^dotllm: interrupted; nothing written to .*out\.gguf\n$/);
    assert.deepEqual(readdirSync(dir), []);
  }),
);

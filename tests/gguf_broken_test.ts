/**
 * A corpus of broken GGUF files, made here (never committed): every one must
 * fail with a clear GgufError, quickly, without a large allocation; and the
 * CLI must say so in one line naming the file, exit code 1.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { runDeno } from "./_cli.ts";
import { testdata } from "./_testdata.ts";
import { GgufArray, GgufError, GgufValueType as T, parseGguf } from "../src/gguf/reader.ts";
import { formatGgufSummary, summarizeGguf } from "../src/gguf/summary.ts";
import { encodeGguf, meta } from "../src/gguf/writer.ts";
import { GgmlType } from "../src/gguf/types.ts";

const encoder = new TextEncoder();

/** A little-endian byte builder that writes whatever it is told, valid or not. */
class Raw {
  #parts: number[] = [];
  u8(v: number): this {
    this.#parts.push(v & 0xff);
    return this;
  }
  u32(v: number): this {
    for (let i = 0; i < 4; i++) this.#parts.push((v >>> (8 * i)) & 0xff);
    return this;
  }
  u64(v: number | bigint): this {
    let b = BigInt(v);
    for (let i = 0; i < 8; i++, b >>= 8n) this.#parts.push(Number(b & 0xffn));
    return this;
  }
  str(s: string): this {
    const b = encoder.encode(s);
    this.u64(b.length);
    for (const x of b) this.#parts.push(x);
    return this;
  }
  zeros(n: number): this {
    for (let i = 0; i < n; i++) this.#parts.push(0);
    return this;
  }
  header(tensorCount: number | bigint, kvCount: number | bigint, version = 3): this {
    return this.u8(0x47).u8(0x47).u8(0x55).u8(0x46).u32(version).u64(tensorCount).u64(kvCount);
  }
  /** A tensor info: name, dims, ggml type, offset. */
  tensor(name: string, dims: (number | bigint)[], type: number, offset: number | bigint): this {
    this.str(name).u32(dims.length);
    for (const d of dims) this.u64(d);
    return this.u32(type).u64(offset);
  }
  get length(): number {
    return this.#parts.length;
  }
  bytes(): Uint8Array {
    return new Uint8Array(this.#parts);
  }
  /** Pads to `alignment` then appends `n` data bytes. */
  data(n: number, alignment = 32): Uint8Array {
    this.zeros((alignment - (this.length % alignment)) % alignment).zeros(n);
    return this.bytes();
  }
}

const P60 = 2n ** 60n;

/** A valid small model: metadata of several types and three tensors. */
function validModel(): Uint8Array {
  return encodeGguf({
    metadata: [
      ["general.architecture", meta.string("llama")],
      ["general.name", meta.string("broken-corpus")],
      ["llama.block_count", meta.u32(1)],
      ["llama.attention.layer_norm_rms_epsilon", meta.f32(1e-5)],
      ["tokenizer.ggml.tokens", meta.array(T.STRING, ["<unk>", "a", "b", "ab"])],
      ["tokenizer.ggml.scores", meta.array(T.FLOAT32, [0, -1, -2, -3])],
      ["x.nested", meta.array(T.ARRAY, [{ elementType: T.UINT64, values: [1n, 2n] }])],
    ],
    tensors: [
      { name: "token_embd.weight", dims: [32, 4], type: GgmlType.Q8_0 },
      { name: "norm.weight", dims: [32], type: GgmlType.F32 },
      { name: "w.weight", dims: [32, 2], type: GgmlType.F16 },
    ],
  }, [new Float32Array(128).fill(0.5), new Float32Array(32).fill(1), new Float32Array(64)]);
}

/** name → bytes, and the message each must fail with. */
function corpus(): Array<[string, Uint8Array, RegExp]> {
  const cases: Array<[string, Uint8Array, RegExp]> = [];
  const model = validModel();
  assert.equal(parseGguf(model).tensors.length, 3); // the base file is valid
  const real = new Uint8Array(readFileSync(testdata("models/llama-2-tiny-random.gguf")));
  for (const [label, base] of [["model", model], ["tiny-random", real]] as const) {
    for (let i = 0; i < 50; i++) {
      const at = Math.floor((i * base.length) / 50) + (i % 7); // spread, not only round offsets
      cases.push([
        `truncated-${label}-${at}`,
        base.slice(0, at),
        /truncated|past the end|does not fit/,
      ]);
    }
  }
  cases.push(["empty", new Uint8Array(0), /file truncated: magic/]);
  const badMagic = model.slice();
  badMagic.set(encoder.encode("GGML"));
  cases.push(["wrong-magic", badMagic, /not a GGUF file \(bad magic\)/]);
  const bigEndian = model.slice();
  new DataView(bigEndian.buffer).setUint32(4, 3, false);
  cases.push(["big-endian", bigEndian, /^big-endian GGUF \(version 3\) is not supported$/]);
  for (const version of [0, 1, 4, 0xffffffff]) {
    const v = model.slice();
    new DataView(v.buffer).setUint32(4, version, true);
    cases.push([`version-${version}`, v, new RegExp(`^unsupported GGUF version ${version}$`)]);
  }
  cases.push([
    "tensor-count-2^60",
    new Raw().header(P60, 0).zeros(64).bytes(),
    /tensor count 1152921504606846976 at byte 8 is too large/,
  ]);
  cases.push([
    "kv-count-2^60",
    new Raw().header(0, P60).zeros(64).bytes(),
    /metadata count 1152921504606846976 .* too large/,
  ]);
  cases.push([
    "tensor-count-2^40",
    new Raw().header(2 ** 40, 0).zeros(64).bytes(),
    /tensor count 1099511627776 does not fit/,
  ]);
  cases.push([
    "kv-count-2^40",
    new Raw().header(0, 2 ** 40).zeros(64).bytes(),
    /metadata count 1099511627776 does not fit/,
  ]);
  cases.push([
    "array-length-2^60",
    new Raw().header(0, 1).str("a").u32(T.ARRAY).u32(T.UINT8).u64(P60).zeros(64).bytes(),
    /"a" array length 1152921504606846976 .* too large/,
  ]);
  cases.push([
    "array-length-2^40",
    new Raw().header(0, 1).str("a").u32(T.ARRAY).u32(T.UINT32).u64(2 ** 40).zeros(64).bytes(),
    /"a": array of 1099511627776 u32 does not fit/,
  ]);
  cases.push([
    "string-array-length-2^50",
    new Raw().header(0, 1).str("a").u32(T.ARRAY).u32(T.STRING).u64(2 ** 50).zeros(64).bytes(),
    /"a": array of 1125899906842624 string does not fit/,
  ]);
  cases.push([
    "key-length-past-eof",
    new Raw().header(0, 1).u64(1000).zeros(20).bytes(),
    /metadata key 0 is 1000 bytes|truncated/,
  ]);
  cases.push([
    "key-length-2^60",
    new Raw().header(0, 1).u64(P60).zeros(20).bytes(),
    /metadata key 0 length .* too large/,
  ]);
  cases.push([
    "string-value-past-eof",
    new Raw().header(0, 1).str("general.name").u32(T.STRING).u64(5000).zeros(30).bytes(),
    /file truncated: "general.name" at byte \d+ needs 5000 bytes, 30 left/,
  ]);
  cases.push([
    "string-in-array-past-eof",
    new Raw().header(0, 1).str("t").u32(T.ARRAY).u32(T.STRING).u64(2).str("ok").u64(900).zeros(8)
      .bytes(),
    /"t"\[1\] at byte \d+ needs 900 bytes/,
  ]);
  cases.push([
    "tensor-name-length-2^60",
    new Raw().header(1, 0).u64(P60).zeros(40).bytes(),
    /tensor 0 name length .* too large/,
  ]);
  cases.push([
    "unknown-value-type",
    new Raw().header(0, 1).str("k").u32(13).zeros(16).bytes(),
    /"k" has unknown value type 13/,
  ]);
  cases.push([
    "unknown-array-type",
    new Raw().header(0, 1).str("k").u32(T.ARRAY).u32(99).u64(1).zeros(16).bytes(),
    /"k" has unknown array type 99/,
  ]);
  cases.push([
    "duplicate-key",
    new Raw().header(0, 2).str("k").u32(T.UINT8).u8(1).str("k").u32(T.UINT8).u8(2).bytes(),
    /duplicate metadata key "k"/,
  ]);
  {
    // 10,000 levels of arrays of one array: refused at the depth limit, no stack overflow.
    const r = new Raw().header(0, 1).str("deep").u32(T.ARRAY);
    for (let i = 0; i < 10_000; i++) r.u32(T.ARRAY).u64(1);
    cases.push([
      "deeply-nested-arrays",
      r.u32(T.UINT8).u64(0).bytes(),
      /arrays nested deeper than 8/,
    ]);
  }
  cases.push([
    "tensor-offset-past-eof",
    new Raw().header(1, 0).tensor("w", [8], GgmlType.F32, 1024).data(32),
    /tensor "w" data \[\d+, \d+\) extends past the end of the file/,
  ]);
  cases.push([
    "tensor-offset-2^60",
    new Raw().header(1, 0).tensor("w", [8], GgmlType.F32, P60).data(32),
    /tensor "w" offset .* too large/,
  ]);
  cases.push([
    "tensor-size-past-eof",
    new Raw().header(1, 0).tensor("w", [1024, 1024], GgmlType.F32, 0).data(64),
    /extends past the end of the file/,
  ]);
  cases.push([
    "dimension-product-overflow",
    new Raw().header(1, 0).tensor("w", [2 ** 31, 2 ** 31, 2 ** 31, 2 ** 31], GgmlType.F32, 0).data(
      32,
    ),
    /tensor "w" element count overflows/,
  ]);
  cases.push([
    "dimension-2^60",
    new Raw().header(1, 0).tensor("w", [P60], GgmlType.F32, 0).data(32),
    /tensor "w" dimension 0 .* too large/,
  ]);
  cases.push([
    "size-overflow",
    new Raw().header(1, 0).tensor("w", [2 ** 26, 2 ** 26], 27, /* I64 */ 0).data(32),
    /tensor "w" size overflows/,
  ]);
  cases.push([
    "zero-dims",
    new Raw().header(1, 0).tensor("w", [], GgmlType.F32, 0).data(32),
    /tensor "w" has 0 dimensions/,
  ]);
  cases.push([
    "five-dims",
    new Raw().header(1, 0).tensor("w", [1, 1, 1, 1, 1], GgmlType.F32, 0).data(32),
    /tensor "w" has 5 dimensions/,
  ]);
  for (const type of [4, 5, 40, 1000, 0xffffffff]) {
    cases.push([
      `unknown-type-${type}`,
      new Raw().header(1, 0).tensor("w", [32], type, 0).data(128),
      new RegExp(`tensor "w" has unknown ggml type ${type}`),
    ]);
  }
  cases.push([
    "row-not-multiple-of-block",
    new Raw().header(1, 0).tensor("w", [33], GgmlType.Q8_0, 0).data(128),
    /row of 33 is not a multiple of Q8_0's block of 32/,
  ]);
  cases.push([
    "misaligned-offset",
    new Raw().header(2, 0).tensor("a", [4], GgmlType.F32, 0).tensor("b", [4], GgmlType.F32, 20)
      .data(64),
    /tensor "b" offset 20 is not a multiple of the alignment 32/,
  ]);
  cases.push([
    "overlapping-tensors",
    new Raw().header(2, 0).tensor("a", [16], GgmlType.F32, 0).tensor("b", [4], GgmlType.F32, 32)
      .data(128),
    /tensors "a" and "b" overlap/,
  ]);
  cases.push([
    "duplicate-tensor-names",
    new Raw().header(2, 0).tensor("w", [4], GgmlType.F32, 0).tensor("w", [4], GgmlType.F32, 32)
      .data(64),
    /duplicate tensor name "w"/,
  ]);
  for (const alignment of [0, 3, 48]) {
    cases.push([
      `alignment-${alignment}`,
      new Raw().header(1, 1).str("general.alignment").u32(T.UINT32).u32(alignment)
        .tensor("w", [4], GgmlType.F32, 0).data(16),
      new RegExp(`general.alignment ${alignment} is not a power of two`),
    ]);
  }
  return cases;
}

Deno.test("the corpus' base file parses as GGUF v3 and as v2 (same layout)", () => {
  const v3 = validModel();
  const v2 = v3.slice();
  new DataView(v2.buffer).setUint32(4, 2, true);
  for (const [version, bytes] of [[3, v3], [2, v2]] as const) {
    const g = parseGguf(bytes);
    assert.equal(g.version, version);
    assert.equal(g.metadata.get("general.name"), "broken-corpus");
    assert.deepEqual(g.tensors.map((t) => t.name), [
      "token_embd.weight",
      "norm.weight",
      "w.weight",
    ]);
  }
});

Deno.test("every broken file fails with a clear GgufError, in < 1 s, growing RSS < 64 MB", () => {
  const cases = corpus();
  assert.ok(cases.length > 140, `${cases.length} cases`);
  for (const [name, bytes, message] of cases) {
    const rssBefore = process.memoryUsage().rss;
    const start = performance.now();
    let error: unknown;
    try {
      parseGguf(bytes);
    } catch (e) {
      error = e;
    }
    const ms = performance.now() - start;
    const grownBytes = process.memoryUsage().rss - rssBefore;
    assert.ok(error instanceof GgufError, `${name}: expected a GgufError, got ${error}`);
    assert.match(error.message, message, name);
    assert.ok(!error.message.includes("\n"), `${name}: one line`);
    assert.ok(ms < 1000, `${name}: ${ms} ms`);
    assert.ok(grownBytes < 64 * 2 ** 20, `${name}: RSS grew by ${grownBytes} bytes`);
  }
});

Deno.test("the CLI reports a broken file in one line naming it, exit code 1", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dotllm-broken-"));
  try {
    const picked = corpus().filter(([name]) =>
      /^(truncated-model-\d*[05]\d\d$|empty|wrong-magic|version-1|.*2\^60|deeply|duplicate-tensor|misaligned|unknown-type-1000|dimension-product)/
        .test(name)
    );
    assert.ok(picked.length >= 12, `${picked.length} picked`);
    const runs = await Promise.all(picked.map(([name, bytes]) => {
      const path = join(dir, `${name}.gguf`);
      writeFileSync(path, bytes);
      return runDeno(["inspect", path]).then((r) => [path, r] as const);
    }));
    for (const [path, r] of runs) {
      assert.equal(r.code, 1, path);
      assert.equal(r.stdout, "", path);
      assert.ok(r.stderr.startsWith(`dotllm: ${path}: `), r.stderr);
      assert.equal(r.stderr.split("\n").length, 2, r.stderr); // one line + final newline
    }
  } finally {
    rmSync(dir, { recursive: true });
  }
});

Deno.test("random byte mutations parse or fail with a GgufError, never anything else", () => {
  const bases = [validModel(), new Uint8Array(readFileSync(testdata("models/stories260K.gguf")))];
  let s = 0x2545f491;
  const next = () => {
    s ^= s << 13, s ^= s >>> 17, s ^= s << 5;
    return s >>> 0;
  };
  let parsed = 0;
  let failed = 0;
  for (let i = 0; i < 3000; i++) {
    const base = bases[i % 2];
    const bytes = base.slice();
    const headerBytes = i % 2 === 0 ? base.length : 14176; // stories260K's data starts at 14176
    for (let k = 0, n = 1 + (next() % 4); k < n; k++) {
      bytes[next() % headerBytes] = next() & 0xff;
    }
    try {
      const g = parseGguf(bytes);
      const summary = summarizeGguf(g); // decodes the heads of every array
      for (const value of g.metadata.values()) {
        if (value instanceof GgufArray) void value.values; // and whole arrays
      }
      assert.equal(summary.tensorCount, g.tensors.length);
      parsed++;
    } catch (error) {
      if (!(error instanceof GgufError)) {
        throw new Error(`mutant ${i}: ${error}`, { cause: error });
      }
      failed++;
    }
  }
  assert.ok(parsed > 100 && failed > 100, `parsed ${parsed}, failed ${failed}`);
});

Deno.test("names with control characters stay on one line in errors and in inspect's text", () => {
  const evil = "a\nb\u0007";
  const dup = new Raw().header(2, 0).tensor(evil, [4], GgmlType.F32, 0)
    .tensor(evil, [4], GgmlType.F32, 32).data(64);
  assert.throws(
    () => parseGguf(dup),
    (e) => e instanceof GgufError && e.message === `duplicate tensor name "a\\nb\\u0007"`,
  );
  const long = "x".repeat(60_000);
  const longDup = new Raw().header(0, 2).str(long).u32(T.UINT8).u8(1).str(long).u32(T.UINT8).u8(1)
    .bytes();
  assert.throws(
    () => parseGguf(longDup),
    (e) => e instanceof GgufError && e.message === `duplicate metadata key "${"x".repeat(80)}..."`,
  );
  const ok = encodeGguf({
    metadata: [[evil, meta.string("v\nw")], ["general.name", meta.string(evil)]],
    tensors: [{ name: evil, dims: [4], type: GgmlType.F32 }],
  }, [new Float32Array(4)]);
  const text = formatGgufSummary(summarizeGguf(parseGguf(ok)));
  assert.ok(!text.includes("\u0007"));
  assert.match(text, /^name: +"a\\nb\\u0007"$/m);
  assert.match(text, /^ +"a\\nb\\u0007" +string +"v\\nw"$/m);
  assert.match(text, /^ +0 +"a\\nb\\u0007" +F32 +4 +16 +\d+$/m);
});

import assert from "node:assert/strict";
import { INVALID_UTF8 } from "./_fuzz.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseGguf } from "../src/gguf/reader.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { ggufBytes, kv, type KvValue } from "./_gguf_bytes.ts";
import { repoRoot, testdata } from "./_testdata.ts";

const SPM_TOKENS = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab"];

function spm(extra: Record<string, KvValue> = {}): Record<string, KvValue> {
  return {
    "tokenizer.ggml.model": kv.str("llama"),
    "tokenizer.ggml.tokens": kv.strings(SPM_TOKENS),
    "tokenizer.ggml.scores": kv.f32s(SPM_TOKENS.map((_, i) => -i)),
    "tokenizer.ggml.token_type": kv.i32s([2, 3, 3, 1, 1, 1, 1, 1, 1]),
    ...extra,
  };
}

function bpe(merges: string[], extra: Record<string, KvValue> = {}): Record<string, KvValue> {
  return {
    "tokenizer.ggml.model": kv.str("gpt2"),
    "tokenizer.ggml.pre": kv.str("gpt-2"),
    "tokenizer.ggml.tokens": kv.strings(["a", "b", "ab", "Ġ", "Ġab"]),
    "tokenizer.ggml.merges": kv.strings(merges),
    ...extra,
  };
}

const load = (kvs: Record<string, KvValue>) => Tokenizer.fromGguf(parseGguf(ggufBytes(kvs)));

Deno.test("a hand-made SPM vocabulary tokenizes by score", () => {
  const t = load(spm());
  // "ab ab" → "▁ab▁ab": ▁a (score -6) beats ab (-7), then ▁ab (-8)
  assert.deepEqual(t.encode("ab ab"), [1, 8, 8]);
  assert.equal(t.decode([8, 8], { special: false }), "ab ab");
});

Deno.test("a hand-made byte-level BPE vocabulary merges by rank", () => {
  const t = load(bpe(["a b", "Ġ ab"]));
  assert.deepEqual(t.encode("ab ab"), [2, 4]);
});

Deno.test("bad vocabularies are refused with a message naming the key", () => {
  const cases: Array<[Record<string, KvValue>, RegExp]> = [
    [
      spm({ "tokenizer.ggml.scores": kv.f32s([0, 1, 2]) }),
      /tokenizer\.ggml\.scores has 3 entries but the vocabulary has 9 tokens/,
    ],
    [
      spm({ "tokenizer.ggml.token_type": kv.i32s([1]) }),
      /tokenizer\.ggml\.token_type has 1 entries/,
    ],
    [
      spm({ "tokenizer.ggml.tokens": kv.i32s([1, 2, 3]) }),
      /tokenizer\.ggml\.tokens must be an array of strings/,
    ],
    [spm({ "tokenizer.ggml.tokens": kv.str("abc") }), /tokenizer\.ggml\.tokens must be an array/],
    [spm({ "tokenizer.ggml.tokens": kv.strings([]) }), /tokenizer\.ggml\.tokens is empty/],
    [
      spm({ "tokenizer.ggml.token_type": kv.strings(SPM_TOKENS) }),
      /token_type must be an array of numbers/,
    ],
    [
      spm({ "tokenizer.ggml.model": kv.str("t5") }),
      /tokenizer "t5" \(tokenizer\.ggml\.model\) is not supported/,
    ],
    [spm({ "tokenizer.ggml.model": kv.u32(3) }), /tokenizer\.ggml\.model must be a string/],
    [spm({ "tokenizer.ggml.add_bos_token": kv.u32(1) }), /add_bos_token must be a bool/],
    [{ "general.name": kv.str("x") }, /no tokenizer\.ggml\.model/],
    [
      bpe(["a b", "Ġ abc"]),
      /tokenizer\.ggml\.merges\[1\] "Ġ abc" names a token that is not in the vocabulary/,
    ],
    [bpe(["ab"]), /tokenizer\.ggml\.merges\[0\] "ab" names a token/],
    [bpe(["a b"], { "tokenizer.ggml.merges": kv.i32s([1]) }), /merges must be an array of strings/],
    [
      bpe(["a b"], { "tokenizer.ggml.pre": kv.str("no-such-pre") }),
      /unknown pre-tokenizer type "no-such-pre"/,
    ],
  ];
  for (const [kvs, message] of cases) assert.throws(() => load(kvs), message);
});

Deno.test("a repeated token text maps to its last id, as in llama.cpp", () => {
  const t = load(
    spm({ "tokenizer.ggml.tokens": kv.strings(["<unk>", "a", "b", "a", "c", "d", "e", "f", "g"]) }),
  );
  assert.equal(t.vocab.tokenToId.get("a"), 3);
  assert.equal(t.tokenToPiece(1), "a");
});

Deno.test("special ids out of range fall back to the defaults, as in llama.cpp", () => {
  const t = load(spm({ "tokenizer.ggml.bos_token_id": kv.u32(1000) }));
  assert.equal(t.bos, 1);
});

async function cli(args: string[], stdin?: string) {
  const command = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", join(repoRoot, "cli.ts"), ...args],
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  });
  const child = command.spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

const STORIES = testdata("models/stories260K.gguf");
const vocabFile = (name: string) => testdata("llama.cpp-vocab", `ggml-vocab-${name}.gguf`);

Deno.test("CLI tokenize / detokenize on stories260K", async () => {
  let r = await cli(["tokenize", STORIES, "-p", "Once upon a time"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "[1,403,407,261,378]\n");
  r = await cli(["tokenize", STORIES, "--no-bos", "--pieces", "-p", "Once upon\ta"]);
  assert.equal(r.stdout, "403\t Once\n407\t upon\n12\t\\t\n412\ta\n");
  r = await cli(["tokenize", STORIES], "Once upon a time");
  assert.equal(r.stdout, "[1,403,407,261,378]\n");
  r = await cli(["tokenize", STORIES, "-p", "<s>Once"]);
  assert.equal(r.stdout, "[1,1,403]\n");
  r = await cli(["tokenize", STORIES, "--no-parse-special", "--no-bos", "-p", "<s>"]);
  assert.equal(r.stdout, "[410,504,419,505]\n");
  r = await cli(["detokenize", STORIES, "--no-special"], "[1,403,407,261,378]");
  assert.equal(r.stdout, " Once upon a time\n");
  r = await cli(["detokenize", STORIES, "-n", "-p", "[403,407]"]);
  assert.equal(r.stdout, "Once upon");
});

Deno.test("CLI: invalid UTF-8 in a file is read as llama.cpp reads it (one U+FFFD per bad byte)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dotllm-tok-"));
  try {
    const file = join(dir, "invalid.txt");
    writeFileSync(file, INVALID_UTF8);
    const r = await cli(["tokenize", vocabFile("gpt-2"), "--no-bos", "-f", file]);
    // llama-tokenize (llama.cpp c392e509) on the same file
    assert.equal(r.stdout, "[397,6353,2124,6353,331,4210,220,48585,1976,26391,0]\n");
  } finally {
    rmSync(dir, { recursive: true });
  }
});

Deno.test("CLI: bad input is one error line and exit 1", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dotllm-tok-"));
  try {
    const badScores = join(dir, "bad-scores.gguf");
    writeFileSync(badScores, ggufBytes(spm({ "tokenizer.ggml.scores": kv.f32s([0]) })));
    const badMerge = join(dir, "bad-merge.gguf");
    writeFileSync(badMerge, ggufBytes(bpe(["a zz"])));
    const badType = join(dir, "bad-type.gguf");
    writeFileSync(badType, ggufBytes(spm({ "tokenizer.ggml.tokens": kv.f32s([1, 2]) })));
    const cases: Array<[string[], RegExp]> = [
      [["tokenize", badScores, "-p", "hi"], /scores has 1 entries but the vocabulary has 9/],
      [["tokenize", badMerge, "-p", "hi"], /merges\[0\] "a zz" names a token that is not/],
      [["tokenize", badType, "-p", "hi"], /tokens must be an array of strings/],
      [["detokenize", STORIES, "-p", "[1,512]"], /token id 512 is out of range/],
      [["detokenize", STORIES, "-p", "[1,2.5]"], /element 1 \(2\.5\) is not an integer token id/],
      [["detokenize", STORIES, "-p", "hello"], /not a JSON array of token ids/],
    ];
    for (const [args, message] of cases) {
      const r = await cli(args);
      assert.equal(r.code, 1, `${args.join(" ")}: ${r.stderr}`);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, /^dotllm: [^\n]+\n$/);
      assert.match(r.stderr, message);
    }
    const usage = await cli(["tokenize", "-p", "x"]);
    assert.equal(usage.code, 2);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

function hasBun(): boolean {
  try {
    return new Deno.Command("bun", { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

Deno.test({
  name: "CLI tokenize under Bun gives the same ids",
  ignore: !hasBun(),
  async fn() {
    const out = await new Deno.Command("bun", {
      args: [join(repoRoot, "cli.ts"), "tokenize", STORIES, "-p", "Once upon a time 😀"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const deno = await cli(["tokenize", STORIES, "-p", "Once upon a time 😀"]);
    assert.equal(new TextDecoder().decode(out.stdout), deno.stdout);
    assert.match(deno.stdout, /^\[1,403,407,261,378,/);
  },
});

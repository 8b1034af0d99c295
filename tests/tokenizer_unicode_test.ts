import assert from "node:assert/strict";
import { INVALID_UTF8 } from "./_fuzz.ts";
import { CP, cpFlags } from "../src/tokenizer/unicode.ts";
import { testdata } from "./_testdata.ts";
import { tokenizerOf, vocabPath } from "./_vocabs.ts";

// Code points new in Unicode 16.0 are unassigned in llama.cpp's (Unicode 15.1) tables:
// their category must not split words differently. Ids from llama-tokenize @ c392e509.
const TEXT = "x \u{141AB}'s \u1B4E\u1B4F Tulu\u{11380}";

Deno.test("Unicode 16.0 additions count as unassigned, as in llama.cpp", () => {
  assert.equal(cpFlags(0x141ab) & (CP.LETTER | CP.NUMBER), 0);
  assert.equal(cpFlags(0x11380) & CP.LETTER, 0);
  assert.ok(cpFlags(0x13430) === 0 || cpFlags(0x1342f) & CP.LETTER); // 15.x code points keep theirs
  assert.ok(cpFlags(0x4e00) & CP.LETTER);
  assert.ok(cpFlags(0xbd) & CP.NUMBER); // ½
  assert.ok(cpFlags(0x85) & CP.WHITESPACE && !(cpFlags(0xfeff) & CP.WHITESPACE));
});

Deno.test("text with Unicode 16.0 characters gives llama.cpp's ids", () => {
  const cases: Array<[string, string, number[]]> = [
    ["qwen2", TEXT, [
      87,
      220,
      172,
      242,
      228,
      104,
      6,
      82,
      86089,
      255,
      236,
      128230,
      237,
      350,
      24411,
      128240,
      236,
      222,
    ]],
    ["llama-bpe", TEXT, [
      87,
      109697,
      242,
      228,
      104,
      6,
      82,
      87189,
      255,
      236,
      157,
      255,
      237,
      350,
      25415,
      172,
      239,
      236,
      222,
    ]],
    ["gpt-2", TEXT, [
      87,
      220,
      172,
      242,
      228,
      104,
      6,
      82,
      28053,
      255,
      236,
      157,
      255,
      237,
      309,
      15712,
      172,
      239,
      236,
      222,
    ]],
    [
      "mpt",
      "\u200b{.,\u0663\ueb801,000\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac\u{141ab}'s\u200f",
      [
        12882,
        92,
        904,
        149,
        98,
        170,
        108,
        211,
        18,
        13,
        933,
        138,
        232,
        29704,
        4992,
        3147,
        12388,
        8348,
        172,
        231,
        217,
        106,
        8,
        84,
        325,
        226,
      ],
    ],
  ];
  for (const [vocab, text, ids] of cases) {
    assert.deepEqual(tokenizerOf(vocabPath(vocab)).encode(text, { addSpecial: false }), ids, vocab);
  }
});

Deno.test("encodeBytes: invalid UTF-8 is tokenized as llama.cpp does (SPM merges raw bytes)", () => {
  const bytes = INVALID_UTF8;
  // ids from llama-tokenize (llama.cpp c392e509) on the same bytes
  assert.deepEqual(tokenizerOf(vocabPath("llama-spm")).encodeBytes(bytes, { addSpecial: false }), [
    633,
    229,
    133,
    229,
    153,
    132,
    29916,
    258,
    257,
    229,
    153,
    132,
    29891,
    198,
    229,
    153,
    132,
    243,
    162,
    155,
    229,
    153,
    132,
    29920,
    30181,
    29991,
  ]);
  assert.deepEqual(tokenizerOf(testdata("models/stories260K.gguf")).encodeBytes(bytes), [
    1,
    261,
    430,
    229,
    133,
    229,
    153,
    132,
    444,
    258,
    257,
    229,
    153,
    132,
    422,
    198,
    229,
    153,
    132,
    243,
    162,
    155,
    229,
    153,
    132,
    451,
    503,
    443,
  ]);
  assert.deepEqual(tokenizerOf(vocabPath("gpt-2")).encodeBytes(bytes), [
    397,
    6353,
    2124,
    6353,
    331,
    4210,
    220,
    48585,
    1976,
    26391,
    0,
  ]);
  // valid UTF-8 takes the text path
  const t = tokenizerOf(vocabPath("llama-spm"));
  assert.deepEqual(t.encodeBytes(new TextEncoder().encode("Hello 😀")), t.encode("Hello 😀"));
});

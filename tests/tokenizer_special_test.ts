import assert from "node:assert/strict";
import { testdata } from "./_testdata.ts";
import { readVectors, tokenizerOf, vocabPath } from "./_vocabs.ts";

const stories = () => tokenizerOf(testdata("models/stories260K.gguf"));

Deno.test("stories260K: BOS is added by default (llama-tokenize's ids)", () => {
  assert.deepEqual(stories().encode("Once upon a time"), [1, 403, 407, 261, 378]);
  assert.deepEqual(stories().encode(""), [1]);
  assert.deepEqual(stories().encode("", { addSpecial: false }), []);
  assert.deepEqual(stories().encode("😀!"), [1, 410, 243, 162, 155, 131, 443]);
});

Deno.test("SPM: special tokens parsed or not, space prefix after a special token", () => {
  const spm = tokenizerOf(vocabPath("llama-spm"));
  assert.deepEqual(spm.encode("<s>Hello</s> world", { parseSpecial: true }), [
    1,
    1,
    15043,
    2,
    29871,
    3186,
  ]);
  assert.deepEqual(spm.encode("<s>Hello</s> world"), [
    1,
    529,
    29879,
    29958,
    10994,
    829,
    29879,
    29958,
    3186,
  ]);
});

Deno.test("phi-3: special tokens strip the spaces after them (llama.cpp's RSTRIP)", () => {
  const phi3 = tokenizerOf(vocabPath("phi-3"));
  assert.deepEqual(phi3.encode("<|user|>  hi<|end|>  x", { parseSpecial: true }), [
    1,
    32010,
    7251,
    32007,
    921,
  ]);
  assert.ok(phi3.isEog(32007) && phi3.isEog(32000));
});

Deno.test("Llama 3: BOS forced on for llama-bpe, control tokens parsed on request", () => {
  const llama3 = tokenizerOf(vocabPath("llama-bpe"));
  assert.equal(llama3.addBos, true);
  const text = "<|begin_of_text|>Hello";
  assert.deepEqual(llama3.encode(text, { parseSpecial: true }), [128000, 128000, 9906]);
  assert.deepEqual(llama3.encode(text, { parseSpecial: true, addSpecial: false }), [128000, 9906]);
  assert.deepEqual(llama3.encode(text, { addSpecial: false }), [
    27,
    91,
    7413,
    3659,
    4424,
    91,
    29,
    9906,
  ]);
  assert.deepEqual(
    llama3.encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", {
      parseSpecial: true,
      addSpecial: false,
    }),
    [128006, 882, 128007, 271, 13347, 128009],
  );
  assert.ok(llama3.isEog(128001) && llama3.isEog(128009) && !llama3.isEog(128000));
});

Deno.test("Qwen2: no BOS, user-defined tokens split even without special parsing, EOG set", () => {
  const qwen = tokenizerOf(vocabPath("qwen2"));
  assert.deepEqual(qwen.encode("<|im_start|>user", { parseSpecial: true }), [151644, 872]);
  assert.deepEqual(qwen.encode("<|im_start|>user"), [27, 91, 318, 4906, 91, 29, 872]);
  assert.deepEqual(
    qwen.encode("<|im_start|>user\n<think>hi</think><|im_end|>", { parseSpecial: true }),
    [151644, 872, 198, 151667, 6023, 151668, 151645],
  );
  assert.deepEqual(qwen.encode("<think>hi</think><|im_end|>"), [
    151667,
    6023,
    151668,
    27,
    91,
    318,
    6213,
    91,
    29,
  ]);
  assert.deepEqual([...qwen.eog].sort(), [151643, 151645, 151662, 151663, 151664]);
});

Deno.test("SmolLM: ChatML tokens, digits split one by one, EOG {0, 2}", () => {
  const smol = tokenizerOf(vocabPath("smollm"));
  assert.deepEqual(smol.encode("<|im_start|>user", { parseSpecial: true }), [1, 4093]);
  assert.deepEqual(smol.encode("<|im_start|>user"), [44, 108, 306, 79, 3738, 108, 46, 4093]);
  assert.deepEqual(
    smol.encode("<|im_start|>user\nHello 123<|im_end|>", { parseSpecial: true }),
    [1, 4093, 198, 19556, 216, 33, 34, 35, 2],
  );
  assert.deepEqual([...smol.eog].sort(), [0, 2]);
});

Deno.test("decode: SPM leading space removed once, control tokens shown only when asked", () => {
  const t = stories();
  const ids = t.encode("Once upon a time");
  assert.equal(t.decode(ids), "<s> Once upon a time");
  assert.equal(t.decode(ids, { special: false }), " Once upon a time");
  assert.equal(t.decode(ids.slice(1)), "Once upon a time");
  assert.equal(t.decode(ids, { removeSpecial: true }), " Once upon a time");
  assert.equal(t.tokenToPiece(403), " Once");
  assert.equal(t.tokenToPiece(2), "</s>");
  assert.equal(t.tokenToPiece(2, false), "");
});

Deno.test("decode: llama.cpp's clean_spaces for GPT-2, off for Qwen2", () => {
  const gpt2 = tokenizerOf(vocabPath("gpt-2"));
  const text = "Hello , world ! He said ' hi ' and it 's ok .";
  const ids = gpt2.encode(text, { addSpecial: false });
  // what llama_detokenize (llama.cpp c392e509) gives for these ids
  assert.equal(gpt2.decode(ids), "Hello, world! He said'hi'and it's ok.");
  assert.equal(gpt2.decode(ids, { cleanSpaces: false }), text);
  const qwen = tokenizerOf(vocabPath("qwen2"));
  assert.equal(qwen.decode(qwen.encode(text)), text);
});

Deno.test("streaming decoder: byte-fallback pieces never give broken UTF-8", () => {
  const t = stories();
  const text = "Tom saw 😀 and 中文 é!";
  const ids = t.encode(text, { addSpecial: false });
  const decoder = t.createDecoder({ removeLeadingSpace: true });
  const chunks = ids.map((id) => decoder.push(id));
  chunks.push(decoder.flush());
  assert.equal(chunks.join(""), text);
  for (const c of chunks) assert.ok(!c.includes("\ufffd"), JSON.stringify(chunks));
  // the emoji is four byte tokens: three pushes give nothing, the fourth the whole emoji
  assert.ok(chunks.filter((c) => c === "").length >= 3);
  assert.ok(chunks.includes("😀"));
  // an unfinished sequence at the end comes out as U+FFFD on flush
  const d2 = t.createDecoder();
  assert.equal(d2.push(t.vocab.tokenToId.get("<0xF0>")!), "");
  assert.equal(d2.flush(), "\ufffd");
});

Deno.test("streaming decoder on byte-level BPE joins split characters", () => {
  const qwen = tokenizerOf(vocabPath("qwen2"));
  const text = "日本語のテキスト 🦙🦙 Ελληνικά";
  const decoder = qwen.createDecoder();
  let out = "";
  for (const id of qwen.encode(text)) {
    const c = decoder.push(id);
    assert.ok(!c.includes("\ufffd"));
    out += c;
  }
  assert.equal(out + decoder.flush(), text);
});

Deno.test("decode and tokenToPiece reject ids out of range", () => {
  const t = stories();
  assert.throws(() => t.decode([1, 512]), /token id 512 is out of range \(the vocabulary has 512/);
  assert.throws(() => t.decode([-1]), /token id -1 is out of range/);
  assert.throws(() => t.tokenToPiece(1.5), /token id 1.5 is out of range/);
  assert.throws(() => t.createDecoder().push(9999), /out of range/);
});

Deno.test("BERT WordPiece: [CLS] ... [SEP] added, lower-cased, accents dropped, unknown words", () => {
  const bert = tokenizerOf(vocabPath("bert-bge"));
  // llama.cpp's ids: `llama-tokenize -m ggml-vocab-bert-bge.gguf -p 'Héllo, WORLD!' --ids`.
  assert.deepEqual(bert.encode("Héllo, WORLD!"), [101, 7592, 1010, 2088, 999, 102]);
  // llama.cpp's vectors (without specials): lower-casing, accents, punctuation, [UNK].
  const golden = new Map(
    readVectors(testdata("llama.cpp-vocab/ggml-vocab-bert-bge.gguf")).map((v) => [v.text, v.ids]),
  );
  for (const text of ["Hello World", "Cửa Việt", "Hello, world!", "កាន់តែពិសេសអាចខលចេញ"]) {
    const want = golden.get(text);
    assert.ok(want !== undefined && want.length > 0, `no vector for ${text}`);
    assert.deepEqual(bert.encode(text), [101, ...want, 102], text);
    assert.deepEqual(bert.encode(text, { addSpecial: false }), want, text);
  }
  assert.deepEqual(golden.get("កាន់តែពិសេសអាចខលចេញ"), [100]);
  assert.deepEqual(bert.encode("\u{10FFF}", { addSpecial: false }), [100]);
});

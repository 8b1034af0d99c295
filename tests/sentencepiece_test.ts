/**
 * The SentencePiece `tokenizer.model` reader: on sentencepiece's three real
 * test models (BPE and unigram, English and Japanese) every piece, score and
 * type and the trainer and normalizer specs equal what sentencepiece's own
 * protobuf module reads (`sentencepiece_model_pb2`, run here); malformed files
 * (truncated varints, fields past their end, absurd lengths, wrong wire types,
 * bad UTF-8, vocabularies sentencepiece refuses) and a fuzz of mutated real
 * models are one-line `ConvertError`s, never a crash or a hang.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ConvertError } from "../src/convert/errors.ts";
import {
  parseSentencePieceModel,
  PieceType,
  type SentencePieceModel,
} from "../src/convert/sentencepiece.ts";
import { prng } from "./_fuzz.ts";
import { pythonPackages, runPython } from "./_python.ts";
import { ensureSentencePieceModels, SENTENCEPIECE_MODELS } from "./_sentencepiece.ts";

const dir = ensureSentencePieceModels();
const names = Object.keys(SENTENCEPIECE_MODELS);

/** sentencepiece's protobuf module, reading each model into JSON. */
const PYTHON_READER = `
import hashlib, json, os, sys
from sentencepiece import sentencepiece_model_pb2 as pb
out = {}
for path in os.environ["MODELS"].split("\\n"):
    m = pb.ModelProto()
    m.ParseFromString(open(path, "rb").read())
    t, n = m.trainer_spec, m.normalizer_spec
    out[os.path.basename(path)] = {
        "pieces": [[p.piece, p.score, p.type] for p in m.pieces],
        "trainer": {
            "modelType": ["", "unigram", "bpe", "word", "char"][t.model_type],
            "vocabSize": t.vocab_size, "unkId": t.unk_id, "bosId": t.bos_id, "eosId": t.eos_id,
            "padId": t.pad_id, "unkPiece": t.unk_piece, "bosPiece": t.bos_piece,
            "eosPiece": t.eos_piece, "padPiece": t.pad_piece, "unkSurface": t.unk_surface,
            "byteFallback": t.byte_fallback, "splitDigits": t.split_digits,
            "splitByWhitespace": t.split_by_whitespace,
            "treatWhitespaceAsSuffix": t.treat_whitespace_as_suffix,
            "allowWhitespaceOnlyPieces": t.allow_whitespace_only_pieces,
            "characterCoverage": t.character_coverage,
            "maxSentencepieceLength": t.max_sentencepiece_length,
            "controlSymbols": list(t.control_symbols),
            "userDefinedSymbols": list(t.user_defined_symbols),
        },
        "normalizer": {
            "name": n.name, "addDummyPrefix": n.add_dummy_prefix,
            "removeExtraWhitespaces": n.remove_extra_whitespaces,
            "escapeWhitespaces": n.escape_whitespaces,
            "normalizationRuleTsv": n.normalization_rule_tsv,
            "charsmapSha256": hashlib.sha256(n.precompiled_charsmap).hexdigest(),
        },
        "hasDenormalizer": m.HasField("denormalizer_spec"),
    }
print(json.dumps(out))
`;

Deno.test("sentencepiece reader: the real models read as sentencepiece's own protobuf module reads them", async () => {
  const env = await pythonPackages("sentencepiece-0.2.3", [
    "sentencepiece==0.2.3",
    "protobuf==7.36.2",
  ]);
  const paths = names.map((n) => join(dir, n));
  const reference = JSON.parse(await runPython(env, PYTHON_READER, { MODELS: paths.join("\n") }));
  for (const name of names) {
    const model = parseSentencePieceModel(readFileSync(join(dir, name)), name);
    const want = reference[name];
    assert.deepEqual(model.pieces.map((p) => [p.piece, p.score, p.type]), want.pieces, name);
    assert.deepEqual(model.trainerSpec, want.trainer, name);
    const { precompiledCharsmap, ...normalizer } = model.normalizerSpec;
    assert.deepEqual(
      {
        ...normalizer,
        charsmapSha256: createHash("sha256").update(precompiledCharsmap).digest("hex"),
      },
      want.normalizer,
      name,
    );
    assert.equal(model.denormalizerSpec !== undefined, want.hasDenormalizer);
  }
  const bpe = parseSentencePieceModel(readFileSync(join(dir, "botchan_en_bpe_1000.model")));
  assert.equal(bpe.trainerSpec.modelType, "bpe");
  assert.equal(bpe.pieces.length, 1000);
  assert.deepEqual(bpe.pieces.slice(0, 4), [
    { piece: "<unk>", score: 0, type: PieceType.UNKNOWN },
    { piece: "<s>", score: 0, type: PieceType.CONTROL },
    { piece: "</s>", score: 0, type: PieceType.CONTROL },
    { piece: "\u2581t", score: -0, type: PieceType.NORMAL }, // stored as -0.0
  ]);
});

// ---------------------------------------------------------------------------
// Malformed files

function varint(n: number | bigint): number[] {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? b | 0x80 : b);
  } while (v > 0n);
  return out;
}
const tag = (field: number, wire: number) => varint((field << 3) | wire);
const bytesField = (field: number, data: number[] | Uint8Array) => [
  ...tag(field, 2),
  ...varint(data.length),
  ...data,
];
const text = (s: string) => [...new TextEncoder().encode(s)];
const f32 = (x: number) => [...new Uint8Array(new Float32Array([x]).buffer)];
function piece(p: string, score = 0, type?: number): number[] {
  return bytesField(1, [
    ...bytesField(1, text(p)),
    ...tag(2, 5),
    ...f32(score),
    ...(type === undefined ? [] : [...tag(3, 0), ...varint(type)]),
  ]);
}
const UNK = piece("<unk>", 0, PieceType.UNKNOWN);
const model = (...parts: number[][]) => new Uint8Array(parts.flat());

/** Parses `bytes`: the model, or the ConvertError (checked to be one line). */
function attempt(bytes: Uint8Array): SentencePieceModel | ConvertError {
  try {
    return parseSentencePieceModel(bytes, "tokenizer.model");
  } catch (error) {
    assert.ok(error instanceof ConvertError, `not a ConvertError: ${(error as Error)?.stack}`);
    assert.ok(!error.message.includes("\n"), error.message);
    assert.match(error.message, /^tokenizer\.model: /);
    return error;
  }
}

function refused(bytes: Uint8Array, pattern: RegExp): void {
  const r = attempt(bytes);
  assert.ok(r instanceof ConvertError, `accepted: ${pattern}`);
  assert.match(r.message, pattern);
}

Deno.test("sentencepiece reader: malformed files → one line naming what is wrong", () => {
  // A small valid model: defaults apply, negative int32 ids (10-byte varints) read back.
  const trainer = bytesField(2, [...tag(3, 0), ...varint(2), ...tag(43, 0), ...varint(-1)]);
  const ok = attempt(model(UNK, piece("\u2581a", -1), trainer));
  assert.ok(!(ok instanceof ConvertError));
  assert.equal(ok.trainerSpec.modelType, "bpe");
  assert.equal(ok.trainerSpec.padId, -1);
  assert.equal(ok.normalizerSpec.addDummyPrefix, true);
  assert.deepEqual(ok.pieces[1], { piece: "\u2581a", score: -1, type: PieceType.NORMAL });
  // Unknown fields of every wire type are skipped, as protobuf does.
  const unknown = [...tag(99, 0), 5, ...tag(98, 1), ...Array(8).fill(0), ...tag(97, 5), 0, 0, 0, 0];
  assert.ok(!(attempt(model(UNK, unknown, bytesField(96, [1, 2, 3]))) instanceof ConvertError));

  refused(new Uint8Array(0), /no pieces/);
  refused(new Uint8Array([0x0a, 0x80]), /truncated varint/);
  refused(new Uint8Array([0x0a, ...Array(11).fill(0xff)]), /varint longer than 10 bytes/);
  refused(model(UNK, [0x0a, 50, 1, 2]), /runs past the end/);
  refused(model(UNK, [0x0a, ...varint(2 ** 40)]), /over 2\^32 bytes runs past the end/);
  refused(model(UNK, [0x0a, ...varint(0xffffffff)]), /4294967295 bytes runs past the end/);
  refused(model(UNK, tag(1, 0), [1]), /field 1 has wire type 0, expected 2/);
  refused(model(UNK, tag(5, 3)), /field 5 has wire type 3/);
  refused(model(UNK, tag(99, 3)), /unsupported wire type 3/);
  refused(model(UNK, [0x00]), /bad field number 0/);
  refused(model(UNK, bytesField(1, [...tag(2, 5), 0, 0])), /truncated float/);
  refused(model(UNK, bytesField(1, bytesField(1, [0xc3, 0x28]))), /not UTF-8/);
  refused(model(UNK, piece("")), /piece 1 is empty/);
  refused(model(UNK, bytesField(1, [...tag(2, 5), ...f32(1)])), /piece 1 is empty/);
  refused(model(UNK, piece("a", 0, 9)), /piece 1 has unknown type 9/);
  refused(model(UNK, piece("a"), piece("a")), /"a" is defined twice \(ids 1 and 2\)/);
  refused(model(UNK, piece("a\0b")), /NUL/);
  refused(model(piece("a")), /no unknown piece/);
  refused(model(UNK, piece("<unk2>", 0, PieceType.UNKNOWN)), /two unknown pieces/);
  refused(model(UNK, piece("<0x41>", 0, PieceType.BYTE)), /byte_fallback is false/);
  const fallback = bytesField(2, [...tag(35, 0), 1]);
  refused(model(UNK, piece("<0x4g>", 0, PieceType.BYTE), fallback), /not <0xXX>/);
  refused(model(UNK, piece("<0x41>", 0, PieceType.BYTE), fallback), /only 1 of 256 byte pieces/);
  refused(model(UNK, bytesField(2, [...tag(3, 0), 7])), /unknown model_type 7/);
  refused(model(UNK, piece("x".repeat(8000))), /too long/);
  // A reserved piece and a normal one may share text (sentencepiece keeps two maps).
  assert.ok(!(attempt(model(UNK, piece("<s>", 0, 3), piece("<s>"))) instanceof ConvertError));
});

Deno.test("sentencepiece reader: fuzz, 600 mutated real models each parse or fail in one line", () => {
  const random = prng(40);
  const real = readFileSync(join(dir, "botchan_en_unigram_1000.model"));
  let failures = 0;
  for (let i = 0; i < 600; i++) {
    let bytes = real.slice();
    const kind = random();
    if (kind < 0.3) bytes = bytes.subarray(0, Math.floor(random() * bytes.length));
    else {
      // Flips where the structure is: the pieces (the first ~12 kB) and the specs (the end).
      const flips = 1 + Math.floor(random() * 6);
      for (let j = 0; j < flips; j++) {
        const near = random() < 0.7
          ? Math.floor(random() * 12000)
          : bytes.length - 1 - Math.floor(random() * 300);
        bytes[near] = random() < 0.5 ? Math.floor(random() * 256) : bytes[near] ^ 0x80;
      }
    }
    if (attempt(bytes) instanceof ConvertError) failures++;
  }
  assert.ok(failures > 150, `only ${failures} of 600 mutations were refused`);
});

/**
 * `POST /v1/embeddings` and llama.cpp's `POST /embedding` of `dotllm serve`
 * on the converted all-MiniLM-L6-v2, through the official clients (npm
 * `openai`, and Python's `openai` installed once into `models/.py/`): float
 * and base64, token-id input, `usage`, the same vectors as `Llm.embed` (and
 * so as llama.cpp's, see `embedding_test.ts`); bad requests are 400s naming
 * the field.
 *
 * @module
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { Llm } from "../mod.ts";
import { EMBEDDING_TEXTS } from "./_embedding_texts.ts";
import { ensureMiniLmGguf } from "./_minilm.ts";
import { pythonPackages } from "./_python.ts";
import { SMOLLM2_Q4_1, startServer } from "./_server.ts";

const minilm = await ensureMiniLmGguf("f32");
const texts = EMBEDDING_TEXTS.slice(0, 5);
const expected = await (async () => {
  using llm = await Llm.load(minilm, { threads: 2 });
  return { vectors: await llm.embed(texts), tokens: texts.map((t) => llm.tokenize(t)) };
})();

function assertClose(got: ArrayLike<number>, want: ArrayLike<number>): void {
  assert.equal(got.length, want.length);
  for (let i = 0; i < want.length; i++) assert.equal(got[i], want[i], `component ${i}`);
}

Deno.test("/v1/embeddings through the npm openai client: float, base64, token ids, usage; /embedding", async () => {
  const server = await startServer(minilm, ["-t", "2", "--parallel", "2"]);
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none" });
    const float = await client.embeddings.create({
      model: "minilm",
      input: texts,
      encoding_format: "float",
    });
    assert.equal(float.object, "list");
    assert.equal(float.model, "minilm");
    assert.equal(float.data.length, texts.length);
    float.data.forEach((d, i) => {
      assert.equal(d.index, i);
      assertClose(d.embedding, expected.vectors[i]);
    });
    const total = expected.tokens.reduce((s, t) => s + t.length, 0);
    assert.deepEqual(float.usage, { prompt_tokens: total, total_tokens: total });
    // The client asks for base64 by default and decodes it: the same f32 bits.
    const b64 = await client.embeddings.create({ model: "minilm", input: texts[1] });
    assertClose(b64.data[0].embedding, expected.vectors[1]);
    const raw = await (await fetch(`${server.url}/v1/embeddings`, {
      method: "POST",
      body: JSON.stringify({ input: texts[1], encoding_format: "base64" }),
    })).json();
    assert.equal(typeof raw.data[0].embedding, "string");
    // Token ids: one sequence, and several.
    const ids = await client.embeddings.create({
      model: "minilm",
      input: expected.tokens[2],
      encoding_format: "float",
    });
    assertClose(ids.data[0].embedding, expected.vectors[2]);
    const many = await client.embeddings.create({
      model: "minilm",
      input: [expected.tokens[3], expected.tokens[4]],
      encoding_format: "float",
    });
    assertClose(many.data[1].embedding, expected.vectors[4]);
    // llama.cpp's /embedding: [{index, embedding: [[...]]}].
    const llama = await (await fetch(`${server.url}/embedding`, {
      method: "POST",
      body: JSON.stringify({ content: texts[0] }),
    })).json();
    assertClose(llama[0].embedding[0], expected.vectors[0]);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

Deno.test("/v1/embeddings: empty, over-long, non-string entries, bad ids, unknown fields → 400 naming them; generation on an encoder → 400", async () => {
  const server = await startServer(minilm, ["-t", "1"]);
  const post = async (body: unknown, path = "/v1/embeddings") => {
    const r = await fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  try {
    const cases: [unknown, string | null, RegExp][] = [
      [{ input: [] }, "input", /empty array/],
      // ids and text together are one prompt (llama-server's mixed prompt)
      [{ input: ["a", 3.5] }, "input", /token id 3.5 is outside the vocabulary/],
      [{ input: ["a", { text: "b" }] }, "input[1]", /prompt_string/],
      [{ input: [101, 99999, 102] }, "input", /token id 99999 is outside the vocabulary/],
      [
        { input: Array(600).fill("word").join(" ") },
        "input[0]",
        /602 tokens, more than the context's 512/,
      ],
      [{ input: "x", dimensions: 8 }, "dimensions", /not supported/],
      [{ input: "x", encoding_format: "int8" }, "encoding_format", /float" or "base64/],
      [{ model: "m" }, "input", /required/],
    ];
    for (const [body, param, message] of cases) {
      const r = await post(body);
      assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
      assert.equal(r.body.error.param, param);
      assert.match(r.body.error.message, message);
    }
    const gen = await post({ prompt: "hi", max_tokens: 2 }, "/v1/completions");
    assert.equal(gen.status, 400);
    assert.match(gen.body.error.message, /encoder: it serves embeddings/);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

Deno.test("a decoder serves embeddings with the pooling asked for (serve --pooling), as llama.cpp", async () => {
  const smol = SMOLLM2_Q4_1;
  const inputs = ["The capital of France is", "embeddings"];
  using llm = await Llm.load(smol, { threads: 1 });
  const last = await llm.embed(inputs, { pooling: "last" });
  // llama-server returns per-token vectors as they are (it normalizes pooled ones only)
  const none = await llm.embed(inputs, { pooling: "none", normalize: -1 });
  const server = await startServer(smol, ["-t", "1", "--pooling", "last"]);
  try {
    const r = await (await fetch(`${server.url}/v1/embeddings`, {
      method: "POST",
      body: JSON.stringify({ input: inputs }),
    })).json();
    r.data.forEach((d: { embedding: number[] }, i: number) => assertClose(d.embedding, last[i]));
  } finally {
    assert.equal(await server.stop(), 0);
  }
  const perToken = await startServer(smol, ["-t", "1", "--pooling", "none"]);
  try {
    const oai = await fetch(`${perToken.url}/v1/embeddings`, {
      method: "POST",
      body: JSON.stringify({ input: inputs }),
    });
    assert.equal(oai.status, 400);
    assert.match((await oai.json()).error.message, /pooling "none" gives one vector per token/);
    const rows = await (await fetch(`${perToken.url}/embedding`, {
      method: "POST",
      body: JSON.stringify({ content: inputs[0] }),
    })).json();
    const E = llm.config.embeddingLength;
    assert.equal(rows[0].embedding.length, none[0].length / E);
    rows[0].embedding.forEach((row: number[], t: number) =>
      assertClose(row, none[0].subarray(t * E, (t + 1) * E))
    );
  } finally {
    assert.equal(await perToken.stop(), 0);
  }
});

// ---------------------------------------------------------------------------
// Python's openai client

/** The same pinned client (and folder) as the structured-output test's. */
const openaiPython = () =>
  pythonPackages("openai-3.63.0", ["openai==3.63.0", "jsonschema==4.26.0"]);

Deno.test("/v1/embeddings through Python's openai client: float, base64, token ids", async () => {
  const python = await openaiPython();
  const server = await startServer(minilm, ["-t", "2"]);
  try {
    const code = `
import json, sys
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key="none")
texts = json.loads(sys.argv[2]); ids = json.loads(sys.argv[3])
f = c.embeddings.create(model="m", input=texts, encoding_format="float")
b = c.embeddings.create(model="m", input=texts[0], encoding_format="base64")
t = c.embeddings.create(model="m", input=ids, encoding_format="float")
print(json.dumps({"float": [d.embedding for d in f.data], "base64": b.data[0].embedding,
                  "ids": t.data[0].embedding, "usage": f.usage.prompt_tokens}))
`;
    const out = await new Deno.Command(python.py, {
      args: ["-c", code, server.url, JSON.stringify(texts), JSON.stringify(expected.tokens[2])],
      env: { PYTHONPATH: python.path },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const r = JSON.parse(new TextDecoder().decode(out.stdout));
    r.float.forEach((v: number[], i: number) => assertClose(v, expected.vectors[i]));
    assert.equal(typeof r.base64, "string"); // Python's client leaves base64 to the caller
    const bytes = Uint8Array.from(atob(r.base64), (c) => c.charCodeAt(0));
    assertClose(new Float32Array(bytes.buffer), expected.vectors[0]);
    assertClose(r.ids, expected.vectors[2]);
    assert.equal(r.usage, expected.tokens.reduce((s, t) => s + t.length, 0));
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

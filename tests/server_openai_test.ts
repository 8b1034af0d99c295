/**
 * `dotllm serve` through the official `openai` client, on the synthetic
 * SmolLM-shaped Q8_0 model: chat (streamed and not), completions, usage,
 * logprobs, stop strings, errors; greedy replies equal `dotllm run` for the
 * same prompt; llama.cpp's /tokenize, /detokenize, /apply-template, /health;
 * /metrics; a burst of bad requests between good ones; SIGTERM lets an
 * in-flight stream finish, answers new requests 503, and exits 0.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { runDeno } from "./_cli.ts";
import { type ServerProcess, smollmQ8, startServer } from "./_server.ts";

const KEY = "test-key";
const MAX = 12;

async function runGreedy(model: string, prompt: string, n: number) {
  const out = await runDeno([
    "run",
    model,
    "-p",
    prompt,
    "-n",
    String(n),
    "--temp",
    "0",
    "--json",
    "-q",
    "-c",
    "512",
    "-t",
    "2",
  ]);
  assert.equal(out.code, 0, out.stderr);
  return JSON.parse(out.stdout) as { text: string; tokens: number[]; finish_reason: string };
}

async function post(server: ServerProcess, path: string, body: unknown, key = KEY) {
  const res = await fetch(server.url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, json: await res.json() };
}

Deno.test({
  name: "serve: OpenAI client, llama.cpp endpoints, bad input, SIGTERM (synthetic SmolLM Q8_0)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const model = smollmQ8();
    const server = await startServer(model, [
      "--parallel",
      "2",
      "-c",
      "1024",
      "-t",
      "2",
      "--api-key",
      KEY,
      "--metrics",
    ]);
    const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: KEY, maxRetries: 0 });
    try {
      const messages = [
        { role: "system" as const, content: "You are terse." },
        { role: "user" as const, content: "Name three colours of the rainbow." },
      ];

      await t.step("models and health", async () => {
        const list = await client.models.list();
        assert.equal(list.data.length, 1);
        assert.equal(list.data[0].id, "smollm-135m-q8_0.gguf");
        const health = await fetch(server.url + "/health"); // no key needed
        assert.deepEqual(await health.json(), { status: "ok" });
      });

      let chatText = "";
      await t.step(
        "chat, not streamed: greedy reply equals dotllm run on the rendered prompt",
        async () => {
          const r = await client.chat.completions.create({
            model: "dotllm",
            messages,
            max_tokens: MAX,
            temperature: 0,
          });
          assert.equal(r.object, "chat.completion");
          assert.equal(r.choices.length, 1);
          assert.equal(r.choices[0].message.role, "assistant");
          assert.equal(r.choices[0].finish_reason, "length");
          chatText = r.choices[0].message.content ?? "";
          const { json: tpl } = await post(server, "/apply-template", { messages });
          assert.match(
            tpl.prompt,
            /<\|im_start\|>user\nName three colours of the rainbow\.<\|im_end\|>\n<\|im_start\|>assistant\n$/,
          );
          const { json: tok } = await post(server, "/tokenize", {
            content: tpl.prompt,
            add_special: true,
          });
          assert.equal(r.usage?.prompt_tokens, tok.tokens.length);
          assert.equal(r.usage?.completion_tokens, MAX);
          assert.equal(r.usage?.total_tokens, tok.tokens.length + MAX);
          const run = await runGreedy(model, tpl.prompt, MAX);
          assert.equal(chatText, run.text);
        },
      );

      await t.step(
        "chat, streamed with usage: the same text, chunk by chunk, then [DONE]",
        async () => {
          const stream = await client.chat.completions.create({
            model: "dotllm",
            messages,
            max_completion_tokens: MAX,
            temperature: 0,
            stream: true,
            stream_options: { include_usage: true },
          });
          let text = "", chunks = 0, finish: string | null = null;
          let usage: OpenAI.CompletionUsage | null | undefined;
          for await (const chunk of stream) {
            chunks++;
            if (chunk.usage) usage = chunk.usage;
            const c = chunk.choices[0];
            if (c?.delta?.content) text += c.delta.content;
            if (c?.finish_reason) finish = c.finish_reason;
          }
          assert.equal(text, chatText);
          assert.equal(finish, "length");
          assert.ok(chunks >= 3, `${chunks} chunks`);
          assert.equal(usage?.completion_tokens, MAX);
          // A repeated conversation continues from the slot's cached prefix.
          const again = await client.chat.completions.create({
            model: "dotllm",
            messages,
            max_tokens: 2,
            temperature: 0,
          });
          const cached = (again.usage as { prompt_tokens_details?: { cached_tokens?: number } })
            ?.prompt_tokens_details?.cached_tokens ?? 0;
          // All but the last token: this model's Q8_0 and F32 matmuls do not depend on the
          // batch, so the server batches freely (probeBatchInvariance) and keeps any prefix.
          assert.equal(cached, (again.usage?.prompt_tokens ?? 0) - 1);
        },
      );

      const prompt = "The capital of France is Paris. The capital of Italy is";
      let completion = "";
      await t.step("completions: greedy text and usage equal dotllm run", async () => {
        const r = await client.completions.create({
          model: "dotllm",
          prompt,
          max_tokens: MAX,
          temperature: 0,
        });
        completion = r.choices[0].text;
        const run = await runGreedy(model, prompt, MAX);
        assert.equal(completion, run.text);
        assert.equal(r.usage?.completion_tokens, run.tokens.length);
        assert.equal(r.choices[0].finish_reason, "length");
        const s = await client.completions.create({
          model: "dotllm",
          prompt,
          max_tokens: MAX,
          temperature: 0,
          stream: true,
        });
        let text = "";
        for await (const chunk of s) text += chunk.choices[0]?.text ?? "";
        assert.equal(text, completion);
      });

      await t.step(
        "stop strings: the reply ends before the first, finish_reason stop",
        async () => {
          const at = Math.max(1, Math.floor(completion.length / 2));
          const stop = completion.slice(at, at + 3);
          assert.ok(stop.length > 0);
          const expected = completion.slice(0, completion.indexOf(stop));
          const r = await client.completions.create({
            model: "dotllm",
            prompt,
            max_tokens: MAX,
            temperature: 0,
            stop: [stop],
          });
          assert.equal(r.choices[0].text, expected);
          assert.equal(r.choices[0].finish_reason, "stop");
          const s = await client.chat.completions.create({
            model: "dotllm",
            messages,
            max_tokens: MAX,
            temperature: 0,
            stop: chatText.slice(4, 7),
            stream: true,
          });
          let text = "", finish = "";
          for await (const chunk of s) {
            text += chunk.choices[0]?.delta?.content ?? "";
            finish = chunk.choices[0]?.finish_reason ?? finish;
          }
          assert.equal(text, chatText.slice(0, chatText.indexOf(chatText.slice(4, 7))));
          assert.equal(finish, "stop");
        },
      );

      await t.step(
        "logprobs: one entry per token, the greedy token is the top alternative",
        async () => {
          const r = await client.chat.completions.create({
            model: "dotllm",
            messages,
            max_tokens: 4,
            temperature: 0,
            logprobs: true,
            top_logprobs: 3,
          });
          const content = r.choices[0].logprobs?.content ?? [];
          assert.equal(content.length, 4);
          for (const item of content) {
            assert.ok(item.logprob <= 0);
            assert.equal(item.top_logprobs.length, 3);
            assert.equal(item.top_logprobs[0].logprob, item.logprob);
            assert.ok(item.top_logprobs[1].logprob <= item.top_logprobs[0].logprob);
          }
          // Seeded sampling repeats itself.
          const a = await client.completions.create({
            model: "dotllm",
            prompt,
            max_tokens: 8,
            temperature: 1,
            seed: 7,
          });
          const b = await client.completions.create({
            model: "dotllm",
            prompt,
            max_tokens: 8,
            temperature: 1,
            seed: 7,
          });
          assert.equal(a.choices[0].text, b.choices[0].text);
        },
      );

      await t.step("errors: OpenAI error objects the client raises", async () => {
        await assert.rejects(
          client.chat.completions.create({ model: "dotllm", messages, max_tokens: -1 }),
          (e: unknown) => e instanceof OpenAI.BadRequestError && /max_tokens/.test(e.message),
        );
        const wrong = new OpenAI({ baseURL: server.url + "/v1", apiKey: "nope", maxRetries: 0 });
        await assert.rejects(
          wrong.models.list(),
          (e: unknown) => e instanceof OpenAI.AuthenticationError,
        );
        await assert.rejects(
          client.completions.create({ model: "dotllm", prompt: "x ".repeat(600), max_tokens: 4 }),
          (e: unknown) => e instanceof OpenAI.BadRequestError && /context/.test(e.message),
        );
      });

      await t.step("llama.cpp endpoints: tokenize/detokenize round trip", async () => {
        const { json: tok } = await post(server, "/tokenize", {
          content: "Hello world",
          with_pieces: true,
        });
        assert.ok(tok.tokens.length >= 2);
        const ids = tok.tokens.map((p: { id: number }) => p.id);
        assert.equal(tok.tokens.map((p: { piece: string }) => p.piece).join(""), "Hello world");
        const { json: detok } = await post(server, "/detokenize", { tokens: ids });
        assert.equal(detok.content, "Hello world");
        const bad = await post(server, "/detokenize", { tokens: [1e9] });
        assert.equal(bad.status, 400);
      });

      await t.step(
        "a burst of bad requests between good ones: right statuses, still serving",
        async () => {
          const good = async () => {
            const r = await client.completions.create({
              model: "dotllm",
              prompt,
              max_tokens: 3,
              temperature: 0,
            });
            assert.equal(r.choices[0].text, completion.slice(0, r.choices[0].text.length));
          };
          const big = "x".repeat(10 * 1024 * 1024);
          const cases: Array<[string, () => Promise<Response>, number, RegExp?]> = [
            [
              "malformed JSON",
              () => raw("/v1/chat/completions", '{"messages": [', KEY),
              400,
              /JSON/,
            ],
            ["not an object", () => raw("/v1/completions", "[1,2]", KEY), 400],
            [
              "wrong type",
              () => raw("/v1/chat/completions", JSON.stringify({ messages: "hi" }), KEY),
              400,
              /messages/,
            ],
            [
              "temperature a string",
              () =>
                raw("/v1/completions", JSON.stringify({ prompt: "a", temperature: "hot" }), KEY),
              400,
              /temperature/,
            ],
            [
              "negative max_tokens",
              () => raw("/v1/completions", JSON.stringify({ prompt: "a", max_tokens: -5 }), KEY),
              400,
              /max_tokens/,
            ],
            [
              "n beyond the server's 2 slots",
              () => raw("/v1/completions", JSON.stringify({ prompt: "a", n: 3 }), KEY),
              400,
              /\bn\b/,
            ],
            [
              "bad role",
              () =>
                raw(
                  "/v1/chat/completions",
                  JSON.stringify({ messages: [{ role: "wizard", content: "x" }] }),
                  KEY,
                ),
              400,
              /role/,
            ],
            ["10 MB body", () => raw("/v1/completions", JSON.stringify({ prompt: big }), KEY), 413],
            ["unknown route", () => raw("/v1/nothing", "{}", KEY), 404],
            [
              "wrong method",
              () => fetch(server.url + "/v1/completions", { headers: auth(KEY) }),
              405,
            ],
            [
              "missing key",
              () => raw("/v1/completions", JSON.stringify({ prompt: "a" }), undefined),
              401,
            ],
            [
              "wrong key",
              () => raw("/v1/completions", JSON.stringify({ prompt: "a" }), "bad"),
              401,
            ],
            [
              "token out of vocabulary",
              () => raw("/v1/completions", JSON.stringify({ prompt: [1, 1e9] }), KEY),
              400,
            ],
          ];
          await good();
          for (const [name, send, status, message] of cases) {
            const res = await send();
            const body = await res.json();
            assert.equal(res.status, status, `${name}: ${JSON.stringify(body)}`);
            assert.equal(typeof body.error?.message, "string", name);
            if (message) {
              assert.match(body.error.message, message, name);
            }
            if (status === 405) {
              assert.equal(res.headers.get("allow"), "POST");
            }
            await good();
          }
          const metrics = await (await fetch(server.url + "/metrics", { headers: auth(KEY) }))
            .text();
          assert.match(
            metrics,
            /dotllm_requests_total\{route="\/v1\/completions",status="413"\} 1/,
          );
          assert.match(metrics, /dotllm_requests_total\{route="other",status="404"\} 1/);
          assert.match(metrics, /dotllm_decode_tokens_per_second \d/);
          assert.match(metrics, /dotllm_kv_cache_usage_ratio 0\.\d+/);
          assert.match(metrics, /dotllm_queue_depth 0/);

          function auth(key?: string): Record<string, string> {
            return key === undefined ? {} : { authorization: `Bearer ${key}` };
          }
          function raw(path: string, body: string, key: string | undefined) {
            return fetch(server.url + path, {
              method: "POST",
              headers: { ...auth(key), "content-type": "application/json" },
              body,
            });
          }
        },
      );

      await t.step(
        "SIGTERM: the in-flight stream finishes, new requests get 503 + Retry-After, exit 0",
        async () => {
          const stream = await client.completions.create({
            model: "dotllm",
            prompt,
            max_tokens: 40,
            temperature: 0,
            stream: true,
          });
          const reader = stream[Symbol.asyncIterator]();
          await reader.next();
          Deno.kill(server.pid, "SIGTERM");
          while (!/SIGTERM: finishing/.test(server.stderr())) {
            await new Promise((r) => setTimeout(r, 5));
          }
          const refused = await post(server, "/v1/completions", { prompt, max_tokens: 2 });
          assert.equal(refused.status, 503);
          assert.equal(refused.json.error.code, "unavailable");
          assert.ok(Number(refused.headers.get("retry-after")) > 0);
          let finish: string | null = null;
          for (;;) {
            const { done, value } = await reader.next();
            if (done) break;
            finish = value.choices[0]?.finish_reason ?? finish;
          }
          assert.equal(finish, "length");
          assert.equal(await server.wait(), 0);
          assert.match(server.stderr(), /SIGTERM: finishing 1 request/);
        },
      );
    } finally {
      await server.stop();
    }
  },
});

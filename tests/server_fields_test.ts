/**
 * `dotllm serve` through the official `openai` client on the real
 * stories260K: every request field dotllm does not implement is a 400 naming
 * it; `n: 2` gives two choices (indices 0 and 1, the same two again for the
 * same seed); `logit_bias` -100 on greedy output's first token keeps it out;
 * `-n` caps `max_tokens`; `--chat-template`, `-sys` and the ChatML warning.
 *
 * The `n` and `logit_bias` tests need the generation core that implements
 * them (the scheduler before it emits one choice and ignores the bias).
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import OpenAI from "openai";
import { startServer } from "./_server.ts";
import { testdata } from "./_testdata.ts";

const STORIES = testdata("models/stories260K.gguf");
const PROMPT = "Once upon a time";

function client(url: string): OpenAI {
  // No retries, and a bound: a request the backend never completes fails instead of hanging.
  return new OpenAI({ baseURL: url + "/v1", apiKey: "none", maxRetries: 0, timeout: 20_000 });
}

/** The status, `param` and message of a rejected call. */
async function rejected(call: Promise<unknown>) {
  try {
    await call;
  } catch (error) {
    if (error instanceof OpenAI.APIError) {
      const e = error.error as { param?: string; message?: string } | undefined;
      return { status: error.status, param: e?.param, message: e?.message ?? "" };
    }
    throw error;
  }
  throw new Error("the request succeeded");
}

Deno.test({
  name: "serve: unimplemented request fields are a 400 naming them (openai client, stories260K)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const server = await startServer(STORIES, ["--parallel", "2", "-c", "512", "-t", "1"]);
    try {
      // stories260K has no chat template: the server says it uses ChatML.
      assert.match(server.stderr(), /warning: stories260K\.gguf has no chat template/);
      const api = client(server.url);
      const messages = [{ role: "user" as const, content: "Hi" }];
      const chat: [string, Record<string, unknown>][] = [
        ["tool_choice", { tool_choice: "required" }], // without tools
        ["functions", { functions: [{ name: "f", parameters: {} }] }],
        ["function_call", { function_call: "auto" }],
        ["mirostat", { mirostat: 2 }],
        ["n_probs", { n_probs: 3 }],
        ["typical_p", { typical_p: 0.5 }],
        ["reasoning_effort", { reasoning_effort: 3 }],
        ["store", { store: true }],
        ["audio", { audio: { voice: "alloy", format: "wav" } }],
        ["suffix", { suffix: "The end." }],
      ];
      for (const [field, extra] of chat) {
        await t.step(`chat: ${field}`, async () => {
          const e = await rejected(
            api.chat.completions.create(
              { model: "m", messages, max_tokens: 4, ...extra } as never,
            ),
          );
          assert.equal(e.status, 400, `${field}: ${e.message}`);
          assert.equal(e.param, field);
          assert.match(e.message, new RegExp(`^${field}: `));
        });
      }
      const completion: [string, Record<string, unknown>][] = [
        ["suffix", { suffix: "The end." }],
        ["echo", { echo: true }],
        ["best_of", { best_of: 3 }],
        ["tools", { tools: [] }],
      ];
      for (const [field, extra] of completion) {
        await t.step(`completions: ${field}`, async () => {
          const e = await rejected(
            api.completions.create(
              { model: "m", prompt: PROMPT, max_tokens: 4, ...extra } as never,
            ),
          );
          assert.equal(e.status, 400, `${field}: ${e.message}`);
          assert.equal(e.param, field);
        });
      }
      await t.step("values that mean nothing, and harmless fields, are accepted", async () => {
        const r = await api.chat.completions.create({
          model: "m",
          messages,
          max_tokens: 4,
          temperature: 0,
          response_format: { type: "text" },
          tools: [],
          tool_choice: "none",
          store: false,
          user: "someone",
          metadata: { a: "b" },
          stream_options: null,
        } as never);
        assert.equal(r.choices.length, 1);
        const c = await api.completions.create({
          model: "m",
          prompt: PROMPT,
          max_tokens: 4,
          temperature: 0,
          echo: false,
          suffix: "",
          best_of: 1,
          user: "someone",
        });
        assert.equal(c.choices.length, 1);
      });
      await t.step(
        "n beyond the slots, and bad logit_bias, are 400s naming the field",
        async () => {
          const n = await rejected(
            api.completions.create({ model: "m", prompt: PROMPT, max_tokens: 4, n: 3 }),
          );
          assert.equal(n.status, 400);
          assert.equal(n.param, "n");
          for (
            const bias of [{ "abc": 1 }, { "1": 101 }, { "1000000": 1 }, [[1]], "x"] as unknown[]
          ) {
            const e = await rejected(
              api.completions.create(
                { model: "m", prompt: PROMPT, max_tokens: 4, logit_bias: bias } as never,
              ),
            );
            assert.equal(e.status, 400, JSON.stringify(bias));
            assert.match(e.param ?? "", /^logit_bias/, JSON.stringify(bias));
          }
        },
      );
    } finally {
      assert.equal(await server.stop(), 0);
    }
  },
});

Deno.test({
  name: "serve: -n is the default and cap of max_tokens; -sys and --chat-template FILE apply",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = Deno.makeTempDirSync();
    const template = `${dir}/t.jinja`;
    writeFileSync(
      template,
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}" +
        "{% if add_generation_prompt %}[assistant] {% endif %}",
    );
    const server = await startServer(STORIES, [
      "-c",
      "512",
      "-t",
      "1",
      "-n",
      "5",
      "--temp",
      "0",
      "-sys",
      "Be kind.",
      "--chat-template",
      template,
      "--parallel",
      "1",
    ]);
    try {
      assert.doesNotMatch(server.stderr(), /no chat template/);
      const api = client(server.url);
      // No max_tokens: -n's 5; a larger max_tokens: capped at 5; a smaller one is kept.
      const none = await api.completions.create(
        { model: "m", prompt: PROMPT, ignore_eos: true } as never,
      );
      assert.equal(none.usage?.completion_tokens, 5);
      assert.equal(none.choices[0].finish_reason, "length");
      const big = await api.completions.create({
        model: "m",
        prompt: PROMPT,
        max_tokens: 50,
        ignore_eos: true,
      } as never);
      assert.equal(big.usage?.completion_tokens, 5);
      const small = await api.completions.create({
        model: "m",
        prompt: PROMPT,
        max_tokens: 2,
        ignore_eos: true,
      } as never);
      assert.equal(small.usage?.completion_tokens, 2);
      // The server's --temp 0 is greedy: the same text twice without a seed.
      assert.equal(none.choices[0].text, big.choices[0].text);
      const res = await fetch(server.url + "/apply-template", {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }] }),
      });
      const { prompt } = await res.json();
      assert.equal(prompt, "[system] Be kind.\n[user] Hi\n[assistant] ");
      // A request's own system message wins over -sys.
      const own = await fetch(server.url + "/apply-template", {
        method: "POST",
        body: JSON.stringify({
          messages: [{ role: "system", content: "S" }, { role: "user", content: "Hi" }],
        }),
      });
      assert.equal((await own.json()).prompt, "[system] S\n[user] Hi\n[assistant] ");
    } finally {
      assert.equal(await server.stop(), 0);
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "serve: n = 2 gives two choices, the same two again for the same seed",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const server = await startServer(STORIES, ["--parallel", "2", "-c", "512", "-t", "1"]);
    try {
      const api = client(server.url);
      const ask = () =>
        api.completions.create({
          model: "m",
          prompt: PROMPT,
          max_tokens: 24,
          n: 2,
          seed: 1234,
          temperature: 1,
        });
      const first = await ask();
      assert.deepEqual(first.choices.map((c) => c.index), [0, 1]);
      assert.ok(first.choices.every((c) => c.text.length > 0));
      const usage = first.usage!;
      assert.ok(usage.completion_tokens > 24, `${usage.completion_tokens}: both choices counted`);
      const again = await ask();
      assert.deepEqual(again.choices.map((c) => c.text), first.choices.map((c) => c.text));
      // Streamed: chunks carry their choice's index; the texts are the same two.
      const stream = await api.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: PROMPT }],
        max_tokens: 12,
        n: 2,
        seed: 99,
        temperature: 1,
        stream: true,
      });
      const texts = ["", ""];
      const finished = [false, false];
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          texts[c.index] += c.delta.content ?? "";
          if (c.finish_reason !== null) finished[c.index] = true;
        }
      }
      assert.deepEqual(finished, [true, true]);
      const whole = await api.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: PROMPT }],
        max_tokens: 12,
        n: 2,
        seed: 99,
        temperature: 1,
      });
      assert.deepEqual(texts, whole.choices.map((c) => c.message.content));
    } finally {
      assert.equal(await server.stop(), 0);
    }
  },
});

Deno.test({
  name: "serve: logit_bias -100 keeps greedy output's first token out",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const server = await startServer(STORIES, ["--parallel", "1", "-c", "512", "-t", "1"]);
    try {
      const api = client(server.url);
      const greedy = (extra: Record<string, unknown>) =>
        api.completions.create({
          model: "m",
          prompt: PROMPT,
          max_tokens: 16,
          temperature: 0,
          logprobs: 0,
          ...extra,
        } as never);
      const plain = await greedy({});
      const firstText = plain.choices[0].logprobs!.tokens![0];
      // Its id: the token of that piece (the tokenizer may add a word-start piece before it).
      const tokenized = await fetch(server.url + "/tokenize", {
        method: "POST",
        body: JSON.stringify({ content: firstText, with_pieces: true }),
      });
      const pieces = (await tokenized.json()).tokens as { id: number; piece: string }[];
      const ids = pieces.filter((p) => p.piece === firstText).map((p) => p.id);
      assert.equal(ids.length, 1, `"${firstText}" is one token: ${JSON.stringify(pieces)}`);
      const banned = ids[0];
      for (const bias of [{ [banned]: -100 }, [[banned, false]]]) {
        const biased = await greedy({ logit_bias: bias });
        const tokens = biased.choices[0].logprobs!.tokens!;
        assert.ok(!tokens.includes(firstText), `${JSON.stringify(bias)}: ${tokens.join("|")}`);
        assert.notEqual(biased.choices[0].text, plain.choices[0].text);
      }
    } finally {
      assert.equal(await server.stop(), 0);
    }
  },
});

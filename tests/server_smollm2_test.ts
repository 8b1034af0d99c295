/**
 * `dotllm serve` on the real SmolLM2-135M-Instruct Q4_1 file with its own
 * chat template: two conversations at once through the `openai` client
 * (one streamed), each greedy reply equal to `dotllm run` on the prompt
 * `/apply-template` renders and to `dotllm run --chat`; the second turn of a conversation reuses the
 * first turn's cached tokens.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { runDeno } from "./_cli.ts";
import { SMOLLM2_Q4_1, startServer } from "./_server.ts";

const N = 24;

Deno.test({
  name:
    "serve: SmolLM2-135M-Instruct Q4_1 chats (2 at once) equal dotllm run on the rendered prompt",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const server = await startServer(SMOLLM2_Q4_1, ["--parallel", "2", "-c", "2048", "-t", "2"]);
    const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "none", maxRetries: 0 });
    try {
      const conversations = [
        [{ role: "user" as const, content: "What is the capital of France?" }],
        [
          { role: "system" as const, content: "You answer in one sentence." },
          { role: "user" as const, content: "Why is the sky blue?" },
        ],
      ];
      const [a, b] = await Promise.all([
        client.chat.completions.create({
          model: "m",
          messages: conversations[0],
          max_tokens: N,
          temperature: 0,
        })
          .then((r) => r.choices[0].message.content ?? ""),
        (async () => {
          const s = await client.chat.completions.create({
            model: "m",
            messages: conversations[1],
            max_tokens: N,
            temperature: 0,
            stream: true,
          });
          let text = "";
          for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? "";
          return text;
        })(),
      ]);
      for (const [i, reply] of [a, b].entries()) {
        const res = await fetch(server.url + "/apply-template", {
          method: "POST",
          body: JSON.stringify({ messages: conversations[i] }),
        });
        const { prompt } = await res.json();
        assert.match(prompt, /<\|im_start\|>assistant\n$/);
        const run = await runDeno([
          "run",
          SMOLLM2_Q4_1,
          "-p",
          prompt,
          "-n",
          String(N),
          "--temp",
          "0",
          "-q",
          "--json",
          "-c",
          "1024",
        ]);
        assert.equal(run.code, 0, run.stderr);
        const want = JSON.parse(run.stdout);
        // The reply may end early at <|im_end|>; run stops at the same token.
        assert.equal(reply, want.text, `conversation ${i}`);
        // ... and `dotllm run --chat` on the same conversation.
        const [system, user] = conversations[i].length === 2
          ? [conversations[i][0].content, conversations[i][1].content]
          : [undefined, conversations[i][0].content];
        const chat = await runDeno([
          "run",
          SMOLLM2_Q4_1,
          "--chat",
          ...(system === undefined ? [] : ["--system", system]),
          "-p",
          user,
          "-n",
          String(N),
          "--temp",
          "0",
          "-q",
          "--json",
          "-c",
          "1024",
        ]);
        assert.equal(chat.code, 0, chat.stderr);
        assert.equal(reply, JSON.parse(chat.stdout).text, `conversation ${i} vs run --chat`);
      }
      // Turn two re-sends turn one: its tokens come from the slot's cache.
      const turn2 = await client.chat.completions.create({
        model: "m",
        messages: [...conversations[0], { role: "assistant", content: a }, {
          role: "user",
          content: "And of Italy?",
        }],
        max_tokens: 8,
        temperature: 0,
      });
      const cached = (turn2.usage as { prompt_tokens_details?: { cached_tokens?: number } })
        .prompt_tokens_details?.cached_tokens ?? 0;
      assert.ok(cached > 20, `cached ${cached} of ${turn2.usage?.prompt_tokens}`);
    } finally {
      await server.stop();
    }
  },
});

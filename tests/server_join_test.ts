/**
 * Continuous batching across arrivals: a request sent while another one is
 * generating joins the running batch at the next step, instead of waiting
 * for the first to finish (`dotllm serve`, model Worker, real SmolLM2 Q4_1),
 * under Deno and under Bun. Checked two ways: the late request finishes
 * first, and the server ran about as many steps as the long request alone
 * needs (`dotllm_decode_steps_total`), not the sum of both.
 */
import assert from "node:assert/strict";
import { SMOLLM2_Q4_1, startServer } from "./_server.ts";

const LONG = 96;
const SHORT = 8;

async function steps(url: string): Promise<number> {
  const text = await (await fetch(url + "/metrics")).text();
  return Number(text.match(/^dotllm_decode_steps_total (\d+)$/m)![1]);
}

for (const runtime of ["deno", "bun"] as const) {
  Deno.test({
    name: `serve (${runtime}): a request sent during another's generation joins its batch`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const server = await startServer(SMOLLM2_Q4_1, [
        "--parallel",
        "2",
        "-c",
        "1024",
        "-t",
        "2",
        "--metrics",
      ], {
        runtime,
      });
      try {
        const before = await steps(server.url);
        const order: string[] = [];
        // The long request streams: the short one is sent once it has generated 8 tokens.
        const long = await fetch(server.url + "/v1/completions", {
          method: "POST",
          body: JSON.stringify({
            prompt: "Once upon a time, in a small village by the sea, there lived",
            max_tokens: LONG,
            temperature: 0,
            ignore_eos: true,
            stream: true,
          }),
        });
        assert.equal(long.status, 200);
        const reader = long.body!.pipeThrough(new TextDecoderStream()).getReader();
        let chunks = 0, buffered = "";
        let short: Promise<void> | undefined;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += value;
          const events = buffered.split("\n\n");
          buffered = events.pop()!;
          chunks += events.filter((e) => e.startsWith("data: {")).length;
          if (short === undefined && chunks >= 8) {
            short = fetch(server.url + "/v1/completions", {
              method: "POST",
              body: JSON.stringify({
                prompt: "Here is a short recipe for a tomato soup:",
                max_tokens: SHORT,
                temperature: 0,
                ignore_eos: true,
              }),
            }).then(async (res) => {
              assert.equal(res.status, 200);
              assert.equal((await res.json()).usage.completion_tokens, SHORT);
              order.push("short");
            });
          }
        }
        order.push("long");
        assert.ok(short !== undefined, "the long request streamed fewer than 8 chunks");
        await short;
        assert.deepEqual(order, ["short", "long"], "the short request waited for the long one");
        const ran = (await steps(server.url)) - before;
        // Alone, the long request takes LONG steps; the short one joining adds at most its
        // prefill step. Waiting instead would add SHORT more.
        assert.ok(ran <= LONG + 1, `${ran} steps for ${LONG} + ${SHORT} tokens: no shared batch`);
      } finally {
        await server.stop();
      }
    },
  });
}

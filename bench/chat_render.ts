/**
 * CPU time of one chat-template render: a 12-message conversation (system,
 * five exchanges, a question) through `ChatTemplate.render` with four of the
 * templates llama.cpp ships, after warm-up; the median of 7 batches of 100,
 * in CPU milliseconds (user + system, so a busy machine skews it less than
 * wall time). The first render (compile, caps probes, reasoning analysis) is
 * printed apart.
 *
 *   deno task bench:render
 *
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { ChatTemplate } from "../src/chat/mod.ts";

const dir = new URL("../tests/golden/chat_render/templates/", import.meta.url);
const messages = [
  { role: "system", content: "You are a helpful assistant." },
  ...Array.from({ length: 5 }, (_, i) => [
    { role: "user", content: `Question ${i}?` },
    { role: "assistant", content: `Answer ${i}.` },
  ]).flat(),
  { role: "user", content: "Last?" },
];
const names = [
  "meta-llama-Llama-3.2-3B-Instruct.jinja",
  "Qwen-Qwen3-0.6B.jinja",
  "openai-gpt-oss-120b.jinja",
  "google-gemma-4-31B-it.jinja",
];
const cpuMs = (from: NodeJS.CpuUsage) => {
  const c = process.cpuUsage(from);
  return (c.user + c.system) / 1000;
};
for (const name of names) {
  const c0 = process.cpuUsage();
  const template = new ChatTemplate(readFileSync(new URL(name, dir), "utf8"), {
    bosToken: "<s>",
    eosToken: "</s>",
    addBos: true,
  });
  template.render(messages);
  const first = cpuMs(c0);
  for (let i = 0; i < 50; i++) template.render(messages);
  const batches: number[] = [];
  for (let b = 0; b < 7; b++) {
    const c = process.cpuUsage();
    for (let i = 0; i < 100; i++) template.render(messages);
    batches.push(cpuMs(c) / 100);
  }
  batches.sort((a, b) => a - b);
  console.log(
    `${name.padEnd(42)} first ${first.toFixed(1).padStart(6)} ms   then ${
      batches[3].toFixed(3)
    } ms/render`,
  );
}

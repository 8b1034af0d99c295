/**
 * Speculative decoding: decode tok/s of `dotllm serve` and `llama-server`
 * with and without speculation, side by side, on the same GGUFs, threads and
 * prompts, greedy, one slot, through `POST /v1/completions` (both report
 * llama.cpp's `timings`: `predicted_n / predicted_ms`, and `draft_n`,
 * `draft_n_accepted`). Two workloads: input-grounded (rewrite a given code
 * file with one change; summarise an article with quotes) and free
 * generation (a story, an essay). Pairs: SmolLM2-135M-Instruct Q4_1 and
 * Gemma 3 270M Q4_K_M with n-gram prompt lookup (`--spec-type ngram-simple`),
 * and SmolLM2 F32 drafted by its Q4_1 (`-md`). Each server's tokens are
 * checked against its own run without speculation. Prints a markdown table.
 *
 *   deno run -A bench/speculative.ts [--llama-server PATH] [-t 2] [-n 160] [--only smollm2|gemma|draft]
 *     [--ngram N,M]   (ngram-simple's sizes, both engines; default llama.cpp's 12,48)
 *
 * @module
 */
import process from "node:process";
import { parseArgs } from "node:util";
import { ensureGemma } from "../tests/_gemma.ts";
import { ladderF32 } from "../tests/_quant_ladder.ts";
import { testdata } from "../tests/_testdata.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    "llama-server": { type: "string" },
    threads: { type: "string", short: "t" },
    "n-predict": { type: "string", short: "n" },
    only: { type: "string" },
    ngram: { type: "string" },
  },
});
const llamaServer = values["llama-server"] ?? "/work/ref/lcpp-build/bin/llama-server";
const threads = values.threads ?? "2";
const nPredict = Number(values["n-predict"] ?? "160");
/** ngram-simple's n and m (llama.cpp's defaults are 12 and 48). */
const [ngramN, ngramM] = (values.ngram ?? "12,48").split(",");
const root = new URL("../", import.meta.url).pathname;

const CODE = `import { readFileSync } from "node:fs";

export interface Order {
  id: number;
  customer: string;
  items: { name: string; price: number; quantity: number }[];
}

export function orderTotal(order: Order): number {
  let total = 0;
  for (const item of order.items) {
    total += item.price * item.quantity;
  }
  return total;
}

export function largestOrder(orders: Order[]): Order | undefined {
  let best: Order | undefined;
  for (const order of orders) {
    if (best === undefined || orderTotal(order) > orderTotal(best)) best = order;
  }
  return best;
}

export function loadOrders(path: string): Order[] {
  const text = readFileSync(path, "utf8");
  return JSON.parse(text) as Order[];
}
`;

const ARTICLE =
  `The town council of Weldon voted on Tuesday to rebuild the old stone bridge over ` +
  `the river. "The bridge has carried our people for a hundred and forty years," said Mayor ` +
  `Ana Ruiz. "We owe it to them to keep it standing." The work will cost 2.4 million dollars ` +
  `and take eighteen months. Shop owners on Market Street worry about the detour. "Half our ` +
  `customers cross that bridge," said baker Tom Lee. The council promised a free shuttle bus ` +
  `while the bridge is closed. Work begins in March.`;

function chatml(user: string): string {
  return `<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`;
}
function gemmaTurn(user: string): string {
  return `<start_of_turn>user\n${user}<end_of_turn>\n<start_of_turn>model\n`;
}

interface Workload {
  name: string;
  prompts: ((turn: (s: string) => string) => string)[];
}

const WORKLOADS: Workload[] = [
  {
    name: "input-grounded",
    prompts: [
      (t) =>
        t(
          `Rewrite this TypeScript file with one change: rename the function orderTotal to ` +
            `totalOf. Output the whole file.\n\n${CODE}`,
        ),
      (t) =>
        t(`Summarise this article in three sentences, quoting the mayor and the baker.\n\n${ARTICLE}`),
    ],
  },
  {
    name: "free",
    prompts: [
      (t) => t("Write a short story about a dragon who learns to bake bread."),
      (t) => t("Explain how a bicycle works, in a few paragraphs."),
    ],
  },
];

interface Server {
  url: string;
  stop(): Promise<void>;
}

let nextPort = 18_400 + Math.floor(Math.random() * 500);

async function start(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Server> {
  const port = nextPort++;
  const child = new Deno.Command(cmd, {
    args: [...args, "--port", String(port)],
    stdout: "null",
    stderr: "piped",
    cwd: root,
    env,
  }).spawn();
  let log = "";
  const decoder = new TextDecoder();
  const drain = (async () => {
    for await (const chunk of child.stderr) log += decoder.decode(chunk, { stream: true });
  })();
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0;; i++) {
    try {
      const r = await fetch(`${url}/health`);
      await r.body?.cancel();
      if (r.ok) break;
    } catch { /* not yet */ }
    if (i > 1200) {
      child.kill("SIGKILL");
      throw new Error(`${cmd} did not start: ${log.slice(-2000)}`);
    }
    const exited = await Promise.race([
      child.status.then(() => true),
      new Promise<false>((r) => setTimeout(() => r(false), 100)),
    ]);
    if (exited) throw new Error(`${cmd} ${args.join(" ")} exited: ${log.slice(-2000)}`);
  }
  return {
    url,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await drain;
    },
  };
}

interface Measure {
  tokens: number;
  ms: number;
  drafted: number;
  accepted: number;
  texts: string[];
}

async function measure(server: Server, prompts: string[]): Promise<Measure> {
  const m: Measure = { tokens: 0, ms: 0, drafted: 0, accepted: 0, texts: [] };
  for (const prompt of prompts) {
    const response = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt, max_tokens: nPredict, temperature: 0, cache_prompt: false }),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(JSON.stringify(body));
    m.tokens += body.timings.predicted_n;
    m.ms += body.timings.predicted_ms;
    m.drafted += body.timings.draft_n ?? 0;
    m.accepted += body.timings.draft_n_accepted ?? 0;
    m.texts.push(body.choices[0].text);
  }
  return m;
}

interface Pair {
  name: string;
  model: () => Promise<string> | string;
  turn: (s: string) => string;
  spec: () => Promise<string[]> | string[];
}

const NGRAM = [
  "--spec-type",
  "ngram-simple",
  "--spec-ngram-simple-size-n",
  ngramN,
  "--spec-ngram-simple-size-m",
  ngramM,
];
const SMOLLM2_Q4_1 = testdata("models", "SmolLM2-135M-Instruct.Q4_1.gguf");
const PAIRS: Pair[] = [
  { name: "smollm2", model: () => SMOLLM2_Q4_1, turn: chatml, spec: () => NGRAM },
  { name: "gemma", model: () => ensureGemma(), turn: gemmaTurn, spec: () => NGRAM },
  {
    name: "draft",
    model: () => ladderF32(),
    turn: chatml,
    // llama-server infers no draft type from a plain GGUF: name draft-simple (dotllm's default with -md).
    spec: () => ["--spec-type", "draft-simple", "-md", SMOLLM2_Q4_1, "--spec-draft-n-max", "4"],
  },
];

const load = Deno.loadavg();
const rows: string[] = [];
const rate = (m: Measure) => m.tokens / m.ms * 1000;
for (const pair of PAIRS) {
  if (values.only !== undefined && values.only !== pair.name) continue;
  const model = await pair.model();
  const spec = await pair.spec();
  const common = ["-m", model, "-t", threads, "-c", "4096", "--parallel", "1"];
  const engines = [
    {
      name: "dotllm",
      run: (extra: string[]) =>
        start(Deno.execPath(), [
          "run",
          "-A",
          "cli.ts",
          "serve",
          model,
          "-t",
          threads,
          "-c",
          "4096",
          "--parallel",
          "1",
          ...extra,
        ]),
    },
    {
      name: "llama.cpp",
      run: (extra: string[]) =>
        // --poll 0: its threads sleep instead of spinning while they wait (on a shared,
        // loaded machine spinning threads starve each other).
        start(llamaServer, [...common, "--no-webui", "--poll", "0", ...extra], {
          LD_LIBRARY_PATH: llamaServer.replace(/\/[^/]*$/, ""),
        }),
    },
  ];
  for (const workload of WORKLOADS) {
    const prompts = workload.prompts.map((p) => p(pair.turn));
    for (const engine of engines) {
      const results: Measure[] = [];
      for (const extra of [[], spec]) {
        const server = await engine.run(extra);
        try {
          await measure(server, [prompts[0]]); // warm-up
          results.push(await measure(server, prompts));
        } finally {
          await server.stop();
        }
      }
      const [base, fast] = results;
      const same = base.texts.every((t, i) => t === fast.texts[i]);
      const accept = fast.drafted > 0 ? (100 * fast.accepted / fast.drafted).toFixed(0) : "-";
      rows.push(
        `| ${pair.name} | ${workload.name} | ${engine.name} | ${rate(base).toFixed(1)} | ` +
          `${rate(fast).toFixed(1)} | ${(rate(fast) / rate(base)).toFixed(2)}× | ` +
          `${fast.accepted}/${fast.drafted} (${accept}%) | ${same ? "yes" : "no"} |`,
      );
      console.error(rows[rows.length - 1]);
    }
  }
}
console.log(
  `\n${new Date().toISOString()}, ${navigator.hardwareConcurrency} CPUs, -t ${threads}, ` +
    `load average ${load.map((x) => x.toFixed(2)).join(" ")} at start, ` +
    `${
      Deno.loadavg().map((x) => x.toFixed(2)).join(" ")
    } at end; ${nPredict} tokens per prompt, greedy; ` +
    `ngram-simple n ${ngramN}, m ${ngramM}\n`,
);
console.log(
  "| pair | workload | engine | tok/s without | tok/s with | speedup | accepted/drafted | same text |",
);
console.log("|---|---|---|---:|---:|---:|---|---|");
for (const row of rows) console.log(row);

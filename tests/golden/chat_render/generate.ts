/**
 * Makes `renders.json`: every request of `requests.json` POSTed to the
 * reference llama-server's `/apply-template` for every template of llama.cpp's
 * `models/templates/*.jinja`, with the prompt (or the error's status and
 * message) it answered. See README.md for the exact command.
 *
 * Usage: deno run --allow-all tests/golden/chat_render/generate.ts SERVER TEMPLATES_DIR MODEL [OUT]
 *
 * @module
 */
import { fileURLToPath } from "node:url";

interface Golden {
  template: string;
  /** The day the server rendered (its clock: templates that print the date print this one). */
  date: string;
  /** The server did not start with this template: its last log lines. */
  startError?: string;
  renders: { id: string; prompt?: string; status?: number; error?: string }[];
}

const [server, templatesDir, model, outArg] = Deno.args;
if (model === undefined) {
  console.error("usage: generate.ts LLAMA_SERVER TEMPLATES_DIR MODEL [OUT]");
  Deno.exit(2);
}
const here = fileURLToPath(new URL(".", import.meta.url));
const out = outArg ?? `${here}renders.json`;
const spec = JSON.parse(Deno.readTextFileSync(`${here}requests.json`));
const port = 18000 + Math.floor(Math.random() * 1000);
const names = [...Deno.readDirSync(templatesDir)]
  .map((e) => e.name)
  .filter((n) => n.endsWith(".jinja"))
  .sort();

function today(): string {
  const d = new Date();
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

async function waitHealthy(child: Deno.ChildProcess): Promise<boolean> {
  let exited = false;
  child.status.then(() => exited = true);
  for (let i = 0; i < 300 && !exited; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/health`);
      await r.body?.cancel();
      if (r.status === 200) return true;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

const goldens: Golden[] = [];
for (const name of names) {
  const logPath = await Deno.makeTempFile();
  const log = await Deno.open(logPath, { write: true });
  const child = new Deno.Command(server, {
    args: [
      "-m",
      model,
      "--jinja",
      "--chat-template-file",
      `${templatesDir}/${name}`,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "-c",
      "256",
      "-t",
      "1",
      "--no-warmup",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  child.stderr.pipeTo(log.writable);
  const golden: Golden = { template: name, date: today(), renders: [] };
  if (!(await waitHealthy(child))) {
    const text = Deno.readTextFileSync(logPath).trim().split("\n").slice(-5).join("\n");
    golden.startError = text;
  } else {
    for (const req of spec.requests) {
      const body = { ...req.body, ...(req.tools ? { tools: spec.tools } : {}) };
      const r = await fetch(`http://127.0.0.1:${port}/apply-template`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const answer = await r.json();
      if (r.status === 200) golden.renders.push({ id: req.id, prompt: answer.prompt });
      else golden.renders.push({ id: req.id, status: r.status, error: answer.error?.message });
    }
  }
  try {
    child.kill("SIGTERM");
  } catch { /* already gone */ }
  await child.status;
  Deno.removeSync(logPath);
  goldens.push(golden);
  const failed = golden.renders.filter((r) => r.error !== undefined).length;
  console.error(`${name}: ${golden.startError ? "did not start" : `${failed} errors`}`);
}
Deno.writeTextFileSync(out, JSON.stringify(goldens, null, 1) + "\n");

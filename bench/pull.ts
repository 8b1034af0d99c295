/**
 * `dotllm pull` of a 250 MB file over loopback against `curl` fetching the
 * same URL (following the same 302 to the same "CDN"), as a ratio of wall
 * times (target: dotllm <= 1.2x curl). Each dotllm run starts from an empty
 * cache, so it pays for everything a real pull does: the process start, the
 * HEAD to the resolve endpoint, the download, the sha256 check and the move
 * into place. Runs alternate to share the machine's noise.
 *
 *   deno task bench:pull [--size-mb 250] [--runs 5] [--before CHECKOUT]
 *
 * Rows: curl; dotllm pull (the body read off the connection, see
 * src/hub/_http1.ts); dotllm pull with `DOTLLM_HUB_FETCH=1` (the body read
 * through `fetch`, as Bun does); and with `--before`, the `cli.ts` of another
 * checkout (say, main's) for a before/after in the same session.
 *
 * The file (random bytes) is written once into the ignored models/bench/.
 *
 * @module
 */
import process from "node:process";
import { parseArgs } from "node:util";
import * as fs from "node:fs";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { LAUNCHER_FLAGS } from "../tests/_hub.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    "size-mb": { type: "string" },
    runs: { type: "string" },
    before: { type: "string" },
  },
});
const sizeBytes = Number(values["size-mb"] ?? 250) * 1_000_000;
const runs = Number(values.runs ?? 5);
const root = new URL("../", import.meta.url).pathname;
const dir = join(root, "models", "bench");
fs.mkdirSync(dir, { recursive: true });
const file = join(dir, `pull-${sizeBytes}.gguf`);

if (!fs.existsSync(file) || fs.statSync(file).size !== sizeBytes) {
  console.error(`writing ${file}`);
  const fd = fs.openSync(file + ".tmp", "w");
  const chunk = new Uint8Array(1 << 20);
  for (let done = 0; done < sizeBytes; done += chunk.length) {
    for (let i = 0; i < chunk.length; i += 65536) {
      crypto.getRandomValues(chunk.subarray(i, i + 65536));
    }
    fs.writeSync(fd, chunk, 0, Math.min(chunk.length, sizeBytes - done));
  }
  fs.closeSync(fd);
  fs.renameSync(file + ".tmp", file);
}
const shaFile = file + ".sha256";
let sha = fs.existsSync(shaFile) ? fs.readFileSync(shaFile, "utf8") : "";
if (sha.length !== 64 || fs.statSync(shaFile).mtimeMs < fs.statSync(file).mtimeMs) {
  const hash = createHash("sha256");
  const fd = fs.openSync(file, "r");
  const buffer = new Uint8Array(4 << 20);
  let n: number;
  while ((n = fs.readSync(fd, buffer)) > 0) hash.update(buffer.subarray(0, n));
  fs.closeSync(fd);
  sha = hash.digest("hex");
  fs.writeFileSync(shaFile, sha);
}

const commit = "0123456789abcdef0123456789abcdef01234567";
const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
  const url = new URL(request.url);
  if (url.pathname === "/bench/pull/resolve/main/model.gguf") {
    return new Response(null, {
      status: 302,
      headers: {
        location: `http://127.0.0.2:${cdn.addr.port}/cdn/${sha}`,
        "x-repo-commit": commit,
        "x-linked-etag": `"${sha}"`,
        "x-linked-size": String(sizeBytes),
      },
    });
  }
  return new Response("Not Found", { status: 404 });
});
const cdn = Deno.serve({ hostname: "127.0.0.2", port: 0, onListen() {} }, async (request) => {
  const headers = {
    "content-length": String(sizeBytes),
    "content-type": "application/octet-stream",
  };
  if (request.method === "HEAD") return new Response(null, { headers });
  const f = await Deno.open(file);
  return new Response(f.readable, { headers });
});
const hubUrl = `http://127.0.0.1:${server.addr.port}`;
const url = `${hubUrl}/bench/pull/resolve/main/model.gguf`;

const TIME = "/usr/bin/time"; // GNU time: the child's CPU seconds, steadier than wall time here

async function timed(
  command: string,
  args: string[],
  env: Record<string, string>,
  cpuTimes: number[],
): Promise<number> {
  const cpuFile = join(dir, "cpu.txt");
  const useTime = fs.existsSync(TIME);
  const start = performance.now();
  const out = await new Deno.Command(useTime ? TIME : command, {
    args: useTime ? ["-f", "%U %S", "-o", cpuFile, command, ...args] : args,
    env,
    stdout: "null",
    stderr: "piped",
  }).output();
  const ms = performance.now() - start;
  if (!out.success) throw new Error(`${command} failed: ${new TextDecoder().decode(out.stderr)}`);
  if (useTime) {
    const [user, sys] = fs.readFileSync(cpuFile, "utf8").trim().split(/\s+/).map(Number);
    cpuTimes.push((user + sys) * 1000);
  }
  return ms;
}

const scratch = join(dir, "scratch");
const pull = async (cli: string, extraEnv: Record<string, string>, cpuTimes: number[]) => {
  fs.rmSync(scratch, { recursive: true, force: true });
  fs.mkdirSync(scratch, { recursive: true });
  const ms = await timed(
    Deno.execPath(),
    [...LAUNCHER_FLAGS, cli, "pull", "bench/pull/model.gguf"],
    {
      HF_HOME: scratch,
      HF_HUB_CACHE: join(scratch, "hub"),
      HF_ENDPOINT: hubUrl,
      HF_TOKEN: "",
      NO_COLOR: "1",
      ...extraEnv,
    },
    cpuTimes,
  );
  const blob = join(scratch, "hub", "models--bench--pull", "blobs", sha);
  if (fs.statSync(blob).size !== sizeBytes) throw new Error("dotllm pull wrote the wrong size");
  return ms;
};
interface Row {
  name: string;
  ms: number[];
  cpu: number[];
  run: (cpuTimes: number[]) => Promise<number>;
}
const rows: Row[] = [
  {
    name: "curl -L",
    ms: [],
    cpu: [],
    run: (c) => {
      fs.rmSync(scratch, { recursive: true, force: true });
      fs.mkdirSync(scratch, { recursive: true });
      return timed("curl", ["-sS", "-fL", "-o", join(scratch, "curl.gguf"), url], {}, c);
    },
  },
  { name: "dotllm pull", ms: [], cpu: [], run: (c) => pull(join(root, "cli.ts"), {}, c) },
  {
    name: "dotllm pull, fetch",
    ms: [],
    cpu: [],
    run: (c) => pull(join(root, "cli.ts"), { DOTLLM_HUB_FETCH: "1" }, c),
  },
];
if (values.before) {
  const cli = join(values.before, "cli.ts");
  rows.push({ name: "dotllm pull (before)", ms: [], cpu: [], run: (c) => pull(cli, {}, c) });
}
const loads: number[] = [];
for (let run = 0; run < runs; run++) {
  // Each round starts one row later, so no row always follows the same one.
  for (let i = 0; i < rows.length; i++) {
    const row = rows[(run + i) % rows.length];
    row.ms.push(await row.run(row.cpu));
  }
  loads.push(Deno.loadavg()[0]);
}
fs.rmSync(scratch, { recursive: true, force: true });
await server.shutdown();
await cdn.shutdown();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mbps = (ms: number) => (sizeBytes / 1e6 / (ms / 1000)).toFixed(0);
const line = (name: string, xs: number[]) =>
  `${name.padEnd(24)} ${median(xs).toFixed(0).padStart(6)} ms (${mbps(median(xs))} MB/s)  runs: ${
    xs.map((x) => x.toFixed(0)).join(" ")
  }`;
console.log(`file: ${sizeBytes / 1e6} MB over loopback, ${runs} interleaved runs each, medians`);
const curl = rows[0];
for (const row of rows) {
  const ratio = row === curl ? "" : `  x${(median(row.ms) / median(curl.ms)).toFixed(2)}`;
  const cpuText = row.cpu.length > 0 ? `  CPU ${median(row.cpu).toFixed(0)} ms` : "";
  console.log(`${line(row.name, row.ms)}${ratio}${cpuText}`);
}
console.log(
  `ratio dotllm/curl: ${(median(rows[1].ms) / median(curl.ms)).toFixed(2)} (target <= 1.20)`,
);
console.log(
  `load average (1 min) after each round: ${loads.map((x) => x.toFixed(1)).join(" ")}; now ${
    Deno.loadavg().map((x) => x.toFixed(1)).join(" ")
  }`,
);

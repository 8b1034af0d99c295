/**
 * Scale-out, for real: the nginx configuration of `docs/SERVER.md` (the same
 * text, its three ports changed) in front of two `dotllm serve` replicas of
 * stories260K on loopback, with Debian's `nginx` (installed with apt-get when
 * missing) run as the current user under a temporary prefix. A conversation
 * with an `X-Session-Id` stays on one replica, whose prefix cache it hits;
 * then, in a stream of concurrent requests (streamed and not, with and
 * without a session), one replica is stopped (SIGTERM) midway, and every
 * request still ends 200 with the same greedy completion, some of them
 * retried on the other replica (nginx's access log shows which). Then the
 * stopped replica comes back and the other one is killed (SIGKILL) among
 * non-streamed requests: those are passed on too.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ensureDebianTool } from "./_apt.ts";
import { type ServerProcess, startServer } from "./_server.ts";
import { repoRoot, testdata } from "./_testdata.ts";

const STORIES = testdata("models/stories260K.gguf");
const REPLICA_ARGS = ["--parallel", "2", "-c", "1024", "-t", "1", "--temp", "0", "--metrics"];

/** The first ```nginx block of docs/SERVER.md. */
function documentedConfig(): string {
  const doc = readFileSync(join(repoRoot, "docs", "SERVER.md"), "utf8");
  const m = /^```nginx\n([\s\S]*?)^```$/m.exec(doc);
  assert.ok(m, "docs/SERVER.md has an ```nginx block");
  return m[1];
}

/** The ports of the documented config: nginx's, and the two replicas'. */
const DOC_PORTS = ["listen 8080;", "127.0.0.1:8081", "127.0.0.1:8082"] as const;

/** `config` with its ports replaced (each found as often as the doc has it), nothing else. */
function withPorts(config: string, listen: number, a: number, b: number): string {
  const swaps: [string, string, number][] = [
    [DOC_PORTS[0], `listen 127.0.0.1:${listen};`, 1],
    [DOC_PORTS[1], `127.0.0.1:${a}`, 2],
    [DOC_PORTS[2], `127.0.0.1:${b}`, 2],
  ];
  for (const [from, to, count] of swaps) {
    assert.equal(config.split(from).length - 1, count, `${from} in the documented config`);
    config = config.replaceAll(from, to);
  }
  return config;
}

/** What Debian's /etc/nginx/nginx.conf gives the doc's file, with every path under `prefix`. */
function mainConfig(prefix: string): string {
  // As root, the workers would switch to `nobody` (who cannot enter the 0700 prefix).
  const user = Deno.uid() === 0 ? "user root;\n" : "";
  return `${user}worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log notice;
events { worker_connections 256; }
http {
    log_format upstreams '$status "$upstream_addr" "$upstream_status" "$http_x_session_id"';
    access_log ${prefix}/access.log upstreams;
    client_body_temp_path ${prefix}/client_body;
    proxy_temp_path ${prefix}/proxy;
    fastcgi_temp_path ${prefix}/fastcgi;
    uwsgi_temp_path ${prefix}/uwsgi;
    scgi_temp_path ${prefix}/scgi;
    include ${prefix}/dotllm.conf;
}
`;
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

const portOf = (server: ServerProcess) => Number(new URL(server.url).port);

/** One access-log line: status, the replicas tried in order, their statuses, the session. */
interface Logged {
  status: number;
  upstreams: string[];
  statuses: string[];
  session: string;
}

function accessLog(prefix: string): Logged[] {
  const text = readFileSync(join(prefix, "access.log"), "utf8");
  return text.trim().split("\n").filter((l) => l !== "").map((line) => {
    const m = /^(\d+) "([^"]*)" "([^"]*)" "([^"]*)"$/.exec(line);
    assert.ok(m, `access log line: ${line}`);
    return {
      status: Number(m[1]),
      upstreams: m[2].split(/,\s*|\s*:\s*(?=\d+\.)/).filter((s) => s !== ""),
      statuses: m[3].split(/[,:]\s*/).filter((s) => s !== ""),
      session: m[4] === "-" ? "" : m[4],
    };
  });
}

interface Completion {
  status: number;
  text: string;
  finish: string;
}

/** A greedy completion through `base`, streamed or not, with an X-Session-Id or not. */
async function complete(
  base: string,
  prompt: string,
  { stream = false, session }: { stream?: boolean; session?: string } = {},
): Promise<Completion> {
  const res = await fetch(base + "/v1/completions", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(session ? { "x-session-id": session } : {}),
    },
    body: JSON.stringify({ prompt, max_tokens: 40, temperature: 0, stream }),
  });
  const body = await res.text();
  if (res.status !== 200) return { status: res.status, text: body, finish: "" };
  if (!stream) {
    const j = JSON.parse(body);
    return { status: 200, text: j.choices[0].text, finish: j.choices[0].finish_reason };
  }
  const events = body.split("\n\n").filter((e) => e !== "");
  assert.equal(events.at(-1), "data: [DONE]", `the stream ends with [DONE]: ${body.slice(-200)}`);
  let text = "", finish = "";
  for (const event of events.slice(0, -1)) {
    assert.ok(event.startsWith("data: "), event);
    const chunk = JSON.parse(event.slice(6));
    assert.equal(chunk.error, undefined, event);
    text += chunk.choices[0]?.text ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { status: 200, text, finish };
}

async function cachedTokens(server: ServerProcess): Promise<number> {
  const metrics = await (await fetch(server.url + "/metrics")).text();
  return Number(/^dotllm_prompt_tokens_cached_total (\d+)$/m.exec(metrics)?.[1]);
}

Deno.test({
  name:
    "serve: two replicas behind nginx (docs/SERVER.md's config): session affinity, and every request completes when one stops midway",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const nginxBin = await ensureDebianTool(["/usr/sbin/nginx"], "nginx");
    const prefix = await Deno.makeTempDir({ prefix: "dotllm-nginx-" });
    const replicas: ServerProcess[] = [];
    let nginx: Deno.ChildProcess | undefined;
    try {
      replicas.push(await startServer(STORIES, REPLICA_ARGS));
      replicas.push(await startServer(STORIES, REPLICA_ARGS));
      const [a, b] = replicas;
      const port = freePort();
      const documented = documentedConfig();
      const config = withPorts(documented, port, portOf(a), portOf(b));
      // The file nginx reads is the doc's text but for the ports.
      assert.equal(
        config.replace(`listen 127.0.0.1:${port};`, DOC_PORTS[0])
          .replaceAll(`127.0.0.1:${portOf(a)}`, DOC_PORTS[1])
          .replaceAll(`127.0.0.1:${portOf(b)}`, DOC_PORTS[2]),
        documented,
      );
      await Deno.writeTextFile(join(prefix, "dotllm.conf"), config);
      await Deno.writeTextFile(join(prefix, "nginx.conf"), mainConfig(prefix));
      const args = [
        "-p",
        prefix + "/",
        "-c",
        join(prefix, "nginx.conf"),
        "-e",
        join(prefix, "error.log"),
      ];
      const check = await new Deno.Command(nginxBin, { args: [...args, "-t"], stderr: "piped" })
        .output();
      assert.ok(check.success, `nginx -t: ${new TextDecoder().decode(check.stderr)}`);

      nginx = new Deno.Command(nginxBin, {
        args: [...args, "-g", "daemon off;"],
        stdin: "null",
        stdout: "null",
        stderr: "null", // its log is error.log (-e), read when it does not start
      }).spawn();
      const base = `http://127.0.0.1:${port}`;
      for (let i = 0;; i++) {
        try {
          (await Deno.connect({ hostname: "127.0.0.1", port })).close();
          break;
        } catch {
          if (i > 100) {
            throw new Error(
              `nginx does not listen: ${readFileSync(join(prefix, "error.log"), "utf8")}`,
            );
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      }

      // The greedy completion every request must get, straight from a replica.
      const prompt = "Once upon a time";
      const expected = await complete(a.url, prompt);
      assert.equal(expected.status, 200);
      assert.ok(expected.text.length > 20, expected.text);

      // 1. A conversation with X-Session-Id stays on one replica and hits its prefix cache.
      const cachedBefore = [await cachedTokens(a), await cachedTokens(b)];
      let conversation = "Lily and Ben went to the park.";
      for (let turn = 0; turn < 4; turn++) {
        const r = await complete(base, conversation, { session: "conversation-1" });
        assert.equal(r.status, 200, r.text);
        conversation += r.text + " Then";
      }
      const turns = accessLog(prefix).filter((l) => l.session === "conversation-1");
      assert.equal(turns.length, 4);
      const home = turns[0].upstreams.at(-1)!;
      assert.deepEqual(turns.map((t) => t.upstreams), turns.map(() => [home]));
      const homeReplica = replicas.find((r) => home.endsWith(":" + portOf(r)))!;
      assert.ok(homeReplica, `${home} is a replica`);
      const cached = await cachedTokens(homeReplica) - cachedBefore[replicas.indexOf(homeReplica)];
      assert.ok(cached > 0, "later turns reuse the replica's cached prefix");
      const logged = accessLog(prefix).length;

      // 2. 48 requests, 6 at a time; replica a gets SIGTERM once 12 have completed.
      const total = 48, concurrency = 6;
      let next = 0, completed = 0;
      let stopped: Promise<number> | undefined;
      const results: Completion[] = [];
      const worker = async () => {
        while (next < total) {
          const i = next++;
          const r = await complete(base, prompt, {
            stream: i % 2 === 1,
            session: i % 4 >= 2 ? `session-${i % 5}` : undefined,
          });
          results[i] = r;
          if (++completed === 12) stopped = a.stop("SIGTERM");
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      assert.ok(stopped, "replica a was stopped");
      assert.equal(await stopped, 0, a.stderr());

      for (const [i, r] of results.entries()) {
        assert.equal(r.status, 200, `request ${i}: ${r.text}`);
        assert.equal(r.text, expected.text, `request ${i}`);
        assert.equal(r.finish, expected.finish, `request ${i}`);
      }
      const run = accessLog(prefix).slice(logged);
      assert.equal(run.length, total);
      assert.deepEqual(run.filter((l) => l.status !== 200), []);
      const retried = run.filter((l) => l.upstreams.length > 1);
      const served = (r: ServerProcess) =>
        run.filter((l) => l.upstreams.at(-1)!.endsWith(":" + portOf(r))).length;
      const draining = /finishing (\d+) request/.exec(a.stderr())?.[1];
      console.log(
        `replica a served ${served(a)} (${draining} in flight when stopped), b ${served(b)}; ` +
          `${retried.length} retried on the other ` +
          `(first tries answered ${[...new Set(retried.map((l) => l.statuses[0]))].join(", ")})`,
      );
      assert.ok(served(a) > 0 && served(b) > 0, "both replicas served requests");
      assert.ok(retried.length > 0, "requests reaching the stopped replica were passed on");
      assert.ok(retried.every((l) => l.upstreams.at(-1)!.endsWith(":" + portOf(b))));

      // 3. Replica a comes back on its port; once nginx sends to it again (after fail_timeout),
      // b is killed (SIGKILL, a crash) among non-streamed requests: those it held are passed to
      // a, since nothing of their response had reached the client.
      const back = await startServer(STORIES, [...REPLICA_ARGS, "--port", String(portOf(a))]);
      replicas.push(back);
      const backAt = accessLog(prefix).length;
      for (let i = 0;; i++) {
        assert.equal((await complete(base, prompt)).status, 200);
        const tried = accessLog(prefix).slice(backAt).map((l) => l.upstreams.at(-1)!);
        if (tried.some((u) => u.endsWith(":" + portOf(a)))) break;
        assert.ok(i < 100, "nginx sends to the restarted replica again");
        await new Promise((r) => setTimeout(r, 200));
      }
      const crashAt = accessLog(prefix).length;
      const crash: Completion[] = [];
      next = 0, completed = 0;
      const plain = async () => {
        while (next < 16) {
          const i = next++;
          crash[i] = await complete(base, prompt);
          if (++completed === 4) await b.stop("SIGKILL");
        }
      };
      await Promise.all(Array.from({ length: 4 }, plain));
      for (const [i, r] of crash.entries()) {
        assert.equal(r.status, 200, `request ${i} after the crash: ${r.text}`);
        assert.equal(r.text, expected.text, `request ${i} after the crash`);
      }
      const afterCrash = accessLog(prefix).slice(crashAt);
      assert.deepEqual(afterCrash.filter((l) => l.status !== 200), []);
      const passedOn = afterCrash.filter((l) => l.upstreams.length > 1);
      console.log(`b killed: ${passedOn.length} of 16 requests passed on to the restarted a`);
      assert.ok(passedOn.length > 0, "requests reaching the killed replica were passed on");
    } finally {
      if (nginx !== undefined) {
        try {
          nginx.kill("SIGTERM");
        } catch { /* gone */ }
        await nginx.status;
      }
      for (const r of replicas) await r.stop();
      await Deno.remove(prefix, { recursive: true }).catch(() => {});
    }
  },
});

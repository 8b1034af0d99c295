/**
 * Probes `GET URL/health` every 50 ms from its own process (so the test's
 * busy event loop does not inflate the timings) until stdin closes, then
 * prints `{ count, p50Ms, p99Ms, maxMs, failures, schedstat, maxServedMs,
 * maxServerCpuMs }` as JSON.
 *
 * With a server PID (`URL PID`) and Linux's `/proc/.../schedstat`, each probe
 * also reads how long the server's main (HTTP) thread and this probe's
 * thread waited runnable for a CPU while it was in flight: on a shared
 * machine the OS may withhold a CPU from any thread for hundreds of
 * milliseconds, which no server can answer through. `maxServedMs` is the
 * largest latency less the longer of those two waits (the time not explained
 * by waiting for a CPU: the server's own work on the HTTP thread, and I/O);
 * `maxServerCpuMs` the most CPU the HTTP thread used during one probe.
 *
 * @module
 */
const url = Deno.args[0] + "/health";
const pid = Deno.args[1];

/** [on-CPU ns, runnable-wait ns] of a thread, or undefined without schedstat. */
function schedstat(path: string): [number, number] | undefined {
  try {
    const [run, wait] = Deno.readTextFileSync(path).split(" ").map(Number);
    return Number.isFinite(run) && Number.isFinite(wait) ? [run, wait] : undefined;
  } catch {
    return undefined;
  }
}
const serverPath = pid === undefined ? undefined : `/proc/${pid}/task/${pid}/schedstat`;
const selfPath = "/proc/thread-self/schedstat";
const hasSchedstat = serverPath !== undefined && schedstat(serverPath) !== undefined &&
  schedstat(selfPath) !== undefined;

let stop = false;
(async () => {
  for await (const _ of Deno.stdin.readable) { /* until closed */ }
  stop = true;
})();
const times: number[] = [];
let failures = 0, maxServedMs = 0, maxServerCpuMs = 0;
while (!stop) {
  const s0 = hasSchedstat ? schedstat(serverPath!) : undefined;
  const p0 = hasSchedstat ? schedstat(selfPath) : undefined;
  const t0 = performance.now();
  try {
    const res = await fetch(url);
    await res.text();
    if (res.status !== 200) failures++;
  } catch {
    failures++;
  }
  const ms = performance.now() - t0;
  times.push(ms);
  const s1 = hasSchedstat ? schedstat(serverPath!) : undefined;
  const p1 = hasSchedstat ? schedstat(selfPath) : undefined;
  if (s0 && s1 && p0 && p1) {
    const waitedMs = Math.max(s1[1] - s0[1], p1[1] - p0[1]) / 1e6;
    maxServedMs = Math.max(maxServedMs, ms - waitedMs);
    maxServerCpuMs = Math.max(maxServerCpuMs, (s1[0] - s0[0]) / 1e6);
  } else {
    maxServedMs = Math.max(maxServedMs, ms);
  }
  await new Promise((r) => setTimeout(r, 50));
}
times.sort((a, b) => a - b);
const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0;
console.log(
  JSON.stringify({
    count: times.length,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    maxMs: times.at(-1) ?? 0,
    failures,
    schedstat: hasSchedstat,
    maxServedMs,
    maxServerCpuMs,
  }),
);

/**
 * Probes `GET URL/health` every 50 ms from its own process (so the test's
 * busy event loop does not inflate the timings) until stdin closes, then
 * prints `{ count, p50Ms, p99Ms, maxMs, failures }` as JSON.
 *
 * @module
 */
const url = Deno.args[0] + "/health";
let stop = false;
(async () => {
  for await (const _ of Deno.stdin.readable) { /* until closed */ }
  stop = true;
})();
const times: number[] = [];
let failures = 0;
while (!stop) {
  const t0 = performance.now();
  try {
    const res = await fetch(url);
    await res.text();
    if (res.status !== 200) failures++;
  } catch {
    failures++;
  }
  times.push(performance.now() - t0);
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
  }),
);

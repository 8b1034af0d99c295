/**
 * The server's counters and their Prometheus text exposition for `/metrics`.
 *
 * @example
 * ```ts
 * import { Metrics } from "./metrics.ts";
 * const m = new Metrics();
 * m.request("/health", 200);
 * if (!m.render(undefined, 0).includes('dotllm_requests_total{route="/health",status="200"} 1')) {
 *   throw new Error("metrics");
 * }
 * ```
 *
 * @module
 */
import type { SchedulerStats } from "./scheduler.ts";

/** HTTP-side counters; the model-side ones come from the scheduler's stats. */
export class Metrics {
  readonly #requests = new Map<string, number>();
  promptTokens = 0;
  completionTokens = 0;

  /** Counts one answered request. */
  request(route: string, status: number): void {
    const key = `route="${route}",status="${status}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
  }

  /** Prometheus text format 0.0.4; `inFlight` = generation requests being answered. */
  render(stats: SchedulerStats | undefined, inFlight: number): string {
    const out: string[] = [];
    const metric = (name: string, type: string, help: string, lines: string[]) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...lines);
    };
    metric(
      "dotllm_requests_total",
      "counter",
      "HTTP requests answered, by route and status.",
      [...this.#requests].map(([k, v]) => `dotllm_requests_total{${k}} ${v}`),
    );
    metric("dotllm_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", [
      `dotllm_prompt_tokens_total ${this.promptTokens}`,
    ]);
    metric("dotllm_completion_tokens_total", "counter", "Generated tokens of finished requests.", [
      `dotllm_completion_tokens_total ${this.completionTokens}`,
    ]);
    metric("dotllm_requests_in_flight", "gauge", "Generation requests being answered.", [
      `dotllm_requests_in_flight ${inFlight}`,
    ]);
    if (stats !== undefined) {
      const s = stats;
      const rate = (
        tokens: number,
        ms: number,
      ) => (ms > 0 ? (tokens / (ms / 1000)).toFixed(3) : "0");
      metric("dotllm_queue_depth", "gauge", "Requests waiting for a free slot.", [
        `dotllm_queue_depth ${s.queueDepth}`,
      ]);
      metric("dotllm_slots", "gauge", "Sequence slots, by state.", [
        `dotllm_slots{state="busy"} ${s.slotsBusy}`,
        `dotllm_slots{state="idle"} ${s.slotCount - s.slotsBusy}`,
      ]);
      metric(
        "dotllm_prompt_tokens_per_second",
        "gauge",
        "Prompt tokens computed per second of prefill, since start.",
        [`dotllm_prompt_tokens_per_second ${
          rate(s.promptTokensTotal - s.cachedTokensTotal, s.prefillMsTotal)
        }`],
      );
      metric(
        "dotllm_decode_tokens_per_second",
        "gauge",
        "Tokens generated per second of decode, all slots together, since start.",
        [`dotllm_decode_tokens_per_second ${rate(s.generatedTokensTotal, s.decodeMsTotal)}`],
      );
      metric(
        "dotllm_prompt_tokens_cached_total",
        "counter",
        "Prompt tokens reused from a slot's KV cache.",
        [
          `dotllm_prompt_tokens_cached_total ${s.cachedTokensTotal}`,
        ],
      );
      metric("dotllm_kv_cache_tokens", "gauge", "KV cache positions holding a token, all slots.", [
        `dotllm_kv_cache_tokens ${s.kvUsedTokens}`,
      ]);
      metric("dotllm_kv_cache_usage_ratio", "gauge", "Fraction of KV cache positions in use.", [
        `dotllm_kv_cache_usage_ratio ${(s.kvUsedTokens / s.kvTotalTokens).toFixed(6)}`,
      ]);
      metric("dotllm_kv_cache_bytes", "gauge", "Bytes of the KV cache, every layer and slot.", [
        `dotllm_kv_cache_bytes ${s.kvBytes}`,
      ]);
      metric("dotllm_decode_steps_total", "counter", "Batches the scheduler ran.", [
        `dotllm_decode_steps_total ${s.stepsTotal}`,
      ]);
    }
    return out.join("\n") + "\n";
  }
}

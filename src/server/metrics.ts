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
  /** Tokens embedded (they count as llama.cpp's prompt tokens), and the batches that ran them. */
  embeddingTokens = 0;
  embeddingBatches = 0;

  /** Counts one answered request. */
  request(route: string, status: number): void {
    const key = `route="${route}",status="${status}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
  }

  /** Most KV positions seen in use at once (llama.cpp's `n_tokens_max`). */
  #tokensMax = 0;

  /**
   * llama-server's metrics, under its names and with its meaning: prompt
   * tokens are the ones computed (cached ones apart), predicted tokens are
   * generated ones, the rates are per second of prefill or decode, and
   * there is no speculative decoding (its counters stay 0).
   */
  #llamaCpp(
    s: SchedulerStats,
    metric: (name: string, type: string, help: string, lines: string[]) => void,
  ): void {
    this.#tokensMax = Math.max(this.#tokensMax, s.kvUsedTokens);
    const m = (name: string, type: string, help: string, value: number) =>
      metric(`llamacpp:${name}`, type, help, [`llamacpp:${name} ${value}`]);
    const computed = s.promptTokensTotal - s.cachedTokensTotal + this.embeddingTokens;
    m("prompt_tokens_total", "counter", "Number of prompt tokens processed.", computed);
    m(
      "prompt_tokens_cached_total",
      "counter",
      "Number of prompt tokens reused from a slot's cache.",
      s.cachedTokensTotal,
    );
    m("prompt_seconds_total", "counter", "Prompt process time.", s.prefillMsTotal / 1000);
    m(
      "tokens_predicted_total",
      "counter",
      "Number of generation tokens processed.",
      s.generatedTokensTotal,
    );
    m(
      "tokens_predicted_seconds_total",
      "counter",
      "Predict process time.",
      s.decodeMsTotal / 1000,
    );
    m(
      "n_decode_total",
      "counter",
      "Total number of llama_decode() calls.",
      s.stepsTotal + this.embeddingBatches,
    );
    m("n_tokens_max", "counter", "Largest observed n_tokens.", this.#tokensMax);
    for (
      const [name, help] of [
        ["spec_decode_num_draft_tokens_total", "Draft tokens (no speculative decoding: 0)."],
        ["spec_decode_num_accepted_tokens_total", "Accepted draft tokens (no drafts: 0)."],
        ["spec_decode_num_drafts_total", "Drafts made (no speculative decoding: 0)."],
      ]
    ) m(name, "counter", help, 0);
    const rate = (n: number, ms: number) => (ms > 0 ? n / (ms / 1000) : 0);
    m(
      "prompt_tokens_seconds",
      "gauge",
      "Average prompt throughput in tokens/s.",
      rate(computed, s.prefillMsTotal),
    );
    m(
      "predicted_tokens_seconds",
      "gauge",
      "Average generation throughput in tokens/s.",
      rate(s.generatedTokensTotal, s.decodeMsTotal),
    );
    m("requests_processing", "gauge", "Number of requests processing.", s.slotsBusy);
    m("requests_deferred", "gauge", "Number of requests deferred.", s.queueDepth);
    m(
      "n_busy_slots_per_decode",
      "gauge",
      "Average number of busy slots per llama_decode() call.",
      s.stepsTotal > 0 ? s.generatedTokensTotal / s.stepsTotal : 0,
    );
    m(
      "kv_cache_usage_ratio",
      "gauge",
      "KV-cache usage. 1 means 100 percent usage.",
      s.kvUsedTokens / s.kvTotalTokens,
    );
    m("kv_cache_tokens", "gauge", "KV-cache tokens.", s.kvUsedTokens);
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
      metric("dotllm_draft_tokens_total", "counter", "Speculation: tokens drafted and verified.", [
        `dotllm_draft_tokens_total ${s.draftedTokensTotal}`,
      ]);
      metric(
        "dotllm_draft_tokens_accepted_total",
        "counter",
        "Speculation: drafted tokens the model kept.",
        [`dotllm_draft_tokens_accepted_total ${s.acceptedTokensTotal}`],
      );
      this.#llamaCpp(s, metric);
    }
    return out.join("\n") + "\n";
  }
}

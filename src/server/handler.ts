/**
 * The HTTP API as one fetch-style handler (`Request` → `Response`), served by
 * `Deno.serve` or `Bun.serve`: OpenAI's `/v1/chat/completions`,
 * `/v1/completions` (streamed as server-sent events ending in
 * `data: [DONE]`) and `/v1/models`; llama.cpp's `/tokenize`, `/detokenize`,
 * `/apply-template` and `/health`; Prometheus `/metrics`; the chat page at
 * `/`. Errors are OpenAI's error JSON.
 *
 * @example Over a backend (a fake one in tests)
 * ```ts ignore
 * const api = new ApiHandler({ backend });
 * Deno.serve({ hostname: "127.0.0.1", port: 8080 }, api.fetch);
 * ```
 *
 * @module
 */
import type { Backend, GenerateInput } from "./backend.ts";
import { Metrics } from "./metrics.ts";
import { embeddingResponse, parseEmbeddingRequest } from "./embeddings.ts";
import { CHAT_PAGE } from "./page.ts";
import {
  ApiError,
  parseChatRequest,
  parseCompletionRequest,
  parseDetokenizeRequest,
  type ParsedRequest,
  parseMessages,
  parseTokenizeRequest,
  type RequestDefaults,
  withSystem,
} from "./protocol.ts";
import type { SequenceEvent, TokenLogprob } from "./scheduler.ts";

/** Options of an {@linkcode ApiHandler}. */
export interface HandlerOptions {
  backend: Backend;
  /** Required as `Authorization: Bearer KEY` on every route but `/health` and `/`. */
  apiKey?: string;
  /** The origin allowed by CORS (`*` for any); none by default. */
  cors?: string;
  /**
   * Largest request body; default 1 MiB: a context of a few thousand tokens is
   * tens of kilobytes of text, and the body is held in memory while parsed.
   */
  bodyLimitBytes?: number;
  /** Requests that may wait for a slot beyond the running ones; default 64 (then 503). */
  queueLimit?: number;
  /** Defaults for fields a request leaves out (sampling, `max_tokens` cap, system message). */
  defaults?: RequestDefaults;
}

/** The default body limit. */
export const DEFAULT_BODY_LIMIT_BYTES = 1 << 20;
/** The default queue bound. */
export const DEFAULT_QUEUE_LIMIT = 64;

const ROUTES: Record<string, readonly string[]> = {
  "/": ["GET"],
  "/health": ["GET"],
  "/v1/health": ["GET"],
  "/metrics": ["GET"],
  "/v1/models": ["GET"],
  "/models": ["GET"],
  "/v1/chat/completions": ["POST"],
  "/chat/completions": ["POST"],
  "/v1/completions": ["POST"],
  "/completions": ["POST"],
  "/tokenize": ["POST"],
  "/detokenize": ["POST"],
  "/apply-template": ["POST"],
  "/v1/embeddings": ["POST"],
  "/embeddings": ["POST"],
  "/embedding": ["POST"],
};

/** Routes open without the API key: the balancer's probe and the page (which asks for the key). */
const PUBLIC_ROUTES = new Set(["/", "/health", "/v1/health"]);

/** Buffers events until the consumer asks; resolves waiters as events arrive. */
class EventQueue {
  readonly #items: SequenceEvent[] = [];
  #wake?: () => void;

  push(event: SequenceEvent): void {
    this.#items.push(event);
    this.#wake?.();
  }

  async next(): Promise<SequenceEvent> {
    while (this.#items.length === 0) {
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
    return this.#items.shift()!;
  }

  /** Takes every buffered event. */
  drain(): SequenceEvent[] {
    return this.#items.splice(0);
  }
}

function randomId(prefix: string): string {
  return prefix + crypto.randomUUID().replaceAll("-", "").slice(0, 24);
}

const encoder = new TextEncoder();

/** The HTTP API over a backend. */
export class ApiHandler {
  readonly backend: Backend;
  readonly metrics = new Metrics();
  readonly #options: HandlerOptions;
  readonly #bodyLimit: number;
  readonly #queueLimit: number;
  #inFlight = 0;
  #draining = false;
  #idle?: () => void;

  constructor(options: HandlerOptions) {
    this.backend = options.backend;
    this.#options = options;
    this.#bodyLimit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
    this.#queueLimit = options.queueLimit ?? DEFAULT_QUEUE_LIMIT;
  }

  /** Generation requests being answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Stops taking generation requests (503) and resolves once in-flight ones end. */
  drain(): Promise<void> {
    this.#draining = true;
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => (this.#idle = resolve));
  }

  /** The fetch handler. */
  fetch = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const route = ROUTES[url.pathname] !== undefined ? url.pathname : "other";
    let response: Response;
    try {
      response = await this.#route(request, url.pathname);
    } catch (error) {
      response = this.#error(
        error instanceof ApiError
          ? error
          : new ApiError(500, `internal error: ${(error as Error)?.message ?? error}`),
      );
    }
    this.metrics.request(route, response.status);
    if (this.#options.cors !== undefined) {
      response.headers.set("access-control-allow-origin", this.#options.cors);
      if (this.#options.cors !== "*") response.headers.append("vary", "Origin");
    }
    return response;
  };

  #error(error: ApiError, headers: Record<string, string> = {}): Response {
    return Response.json(error.toJSON(), { status: error.status, headers });
  }

  async #route(request: Request, path: string): Promise<Response> {
    const methods = ROUTES[path];
    if (methods === undefined) {
      throw new ApiError(404, `no route ${request.method} ${path}`, null, "not_found");
    }
    if (request.method === "OPTIONS" && this.#options.cors !== undefined) {
      return new Response(null, {
        status: 204,
        headers: {
          "access-control-allow-methods": methods.join(", ") + ", OPTIONS",
          "access-control-allow-headers": "authorization, content-type",
          "access-control-max-age": "600",
        },
      });
    }
    if (!methods.includes(request.method) && !(request.method === "HEAD" && methods[0] === "GET")) {
      const e = new ApiError(
        405,
        `${request.method} is not allowed on ${path}`,
        null,
        "method_not_allowed",
      );
      return this.#error(e, { allow: methods.join(", ") });
    }
    const key = this.#options.apiKey;
    if (key !== undefined && !PUBLIC_ROUTES.has(path)) {
      const auth = request.headers.get("authorization") ?? "";
      if (auth !== `Bearer ${key}`) {
        throw new ApiError(
          401,
          auth === "" ? "missing API key (Authorization: Bearer KEY)" : "invalid API key",
          null,
          "invalid_api_key",
          "authentication_error",
        );
      }
    }
    switch (path) {
      case "/":
        return new Response(CHAT_PAGE, { headers: { "content-type": "text/html; charset=utf-8" } });
      case "/health":
      case "/v1/health":
        return Response.json({ status: "ok" });
      case "/metrics":
        return new Response(this.metrics.render(await this.backend.stats(), this.#inFlight), {
          headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
        });
      case "/v1/models":
      case "/models": {
        const i = this.backend.info;
        return Response.json({
          object: "list",
          data: [{
            id: i.id,
            object: "model",
            created: i.created,
            owned_by: "dotllm",
            meta: { n_ctx: i.contextSize, n_vocab: i.vocabSize, n_parallel: i.slotCount },
          }],
        });
      }
      case "/tokenize": {
        const t = parseTokenizeRequest(await this.#json(request));
        const tokens = await this.backend.tokenize(t.content, t.addSpecial, t.parseSpecial);
        if (!t.withPieces) return Response.json({ tokens });
        const pieces = await Promise.all(tokens.map((id) => this.backend.detokenize([id])));
        return Response.json({ tokens: tokens.map((id, i) => ({ id, piece: pieces[i] })) });
      }
      case "/detokenize": {
        const tokens = parseDetokenizeRequest(await this.#json(request));
        try {
          return Response.json({ content: await this.backend.detokenize(tokens) });
        } catch (error) {
          throw new ApiError(400, (error as Error).message, "tokens", "invalid_value");
        }
      }
      case "/apply-template": {
        const body = await this.#json(request) as Record<string, unknown>;
        const messages = withSystem(parseMessages(body?.messages), this.#options.defaults?.system);
        try {
          return Response.json({ prompt: await this.backend.applyTemplate(messages, true) });
        } catch (error) {
          throw new ApiError(400, `chat template: ${(error as Error).message}`, "messages");
        }
      }
      case "/v1/embeddings":
      case "/embeddings":
      case "/embedding":
        return this.#embed(request, path === "/embedding");
      case "/v1/chat/completions":
      case "/chat/completions":
        return this.#generate(request, "chat");
      default:
        return this.#generate(request, "completion");
    }
  }

  /** The body as JSON: 413 past the limit, 400 when it does not parse. */
  async #json(request: Request): Promise<unknown> {
    const declared = Number(request.headers.get("content-length") ?? "NaN");
    if (declared > this.#bodyLimit) {
      await request.body?.cancel().catch(() => {});
      throw this.#tooLarge();
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (request.body !== null) {
      const reader = request.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > this.#bodyLimit) {
          await reader.cancel().catch(() => {});
          throw this.#tooLarge();
        }
        chunks.push(value);
      }
    }
    const bytes = new Uint8Array(size);
    let at = 0;
    for (const c of chunks) {
      bytes.set(c, at);
      at += c.byteLength;
    }
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      return JSON.parse(text);
    } catch (error) {
      throw new ApiError(
        400,
        `the body is not valid JSON: ${(error as Error).message}`,
        null,
        "invalid_json",
      );
    }
  }

  #tooLarge(): ApiError {
    return new ApiError(
      413,
      `the body is larger than ${this.#bodyLimit} bytes`,
      null,
      "body_too_large",
    );
  }

  async #embed(request: Request, llamaCpp: boolean): Promise<Response> {
    if (this.#draining) {
      return this.#error(new ApiError(503, "the server is shutting down", null, "unavailable"), {
        "retry-after": "5",
      });
    }
    const parsed = parseEmbeddingRequest(
      await this.#json(request),
      llamaCpp,
      this.backend.info.vocabSize,
    );
    this.#inFlight++;
    try {
      const out = await this.backend.embed(parsed.input);
      if ("error" in out) throw new ApiError(400, out.error, out.param, "invalid_value");
      this.metrics.promptTokens += out.promptTokens.reduce((a, b) => a + b, 0);
      return Response.json(embeddingResponse(parsed, out, this.backend.info.id));
    } finally {
      this.#inFlight--;
      if (this.#inFlight === 0) this.#idle?.();
    }
  }

  async #generate(request: Request, kind: "chat" | "completion"): Promise<Response> {
    if (this.#draining) {
      return this.#error(new ApiError(503, "the server is shutting down", null, "unavailable"), {
        "retry-after": "5",
      });
    }
    const json = await this.#json(request);
    const defaults = this.#options.defaults ?? {};
    const info = this.backend.info;
    const limits = { maxChoices: info.slotCount, vocabSize: info.vocabSize };
    const parsed = kind === "chat"
      ? parseChatRequest(json, defaults, limits)
      : parseCompletionRequest(json, defaults, limits);
    const capacity = this.backend.info.slotCount + this.#queueLimit;
    if (this.#inFlight >= capacity) {
      return this.#error(
        new ApiError(
          503,
          `every slot is busy and ${this.#queueLimit} requests wait`,
          null,
          "overloaded",
        ),
        { "retry-after": "1" },
      );
    }
    this.#inFlight++;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      this.#inFlight--;
      if (this.#inFlight === 0) this.#idle?.();
    };
    const queue = new EventQueue();
    let cancel: () => void = () => {};
    try {
      cancel = this.backend.generate(parsed.input, (e) => queue.push(e));
      const first = await queue.next();
      if (first.type === "error") {
        end();
        throw new ApiError(
          first.status,
          first.message,
          first.param ?? (first.status === 400 ? "prompt" : null),
        );
      }
      if (first.type !== "start") throw new ApiError(500, "the backend did not start");
      const abort = () => {
        cancel();
        end();
        // Wakes a non-streamed request waiting for its next event.
        queue.push({ type: "error", status: 499, message: "the client closed the request" });
      };
      request.signal?.addEventListener("abort", abort, { once: true });
      const reply = new Reply(kind, parsed, first.promptTokens, this.backend.info.id);
      if (parsed.stream) return this.#stream(reply, queue, abort, end);
      for (;;) {
        const e = await queue.next();
        if (e.type === "error") throw new ApiError(e.status, e.message);
        reply.add(e);
        if (e.type === "done") {
          if (reply.doneCount === 1) this.metrics.promptTokens += e.promptTokens;
          this.metrics.completionTokens += e.completionTokens;
          if (!reply.complete) continue;
          end();
          return Response.json(reply.whole());
        }
      }
    } catch (error) {
      cancel();
      end();
      throw error;
    }
  }

  #stream(reply: Reply, queue: EventQueue, abort: () => void, end: () => void): Response {
    const metrics = this.metrics;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        // The events waiting now go out as one write (one step of the scheduler arrives at once).
        let out = "";
        const send = (data: unknown) => {
          out += `data: ${JSON.stringify(data)}\n\n`;
        };
        const flush = () => {
          if (out !== "") controller.enqueue(encoder.encode(out));
          out = "";
        };
        try {
          // Each pull enqueues something (a pull that enqueues nothing is not
          // called again): events without text, e.g. half a UTF-8 character, wait.
          for (let sent = 0; sent === 0;) {
            const e = await queue.next();
            if (e.type === "error") {
              send(new ApiError(e.status, e.message).toJSON());
              flush();
              controller.close();
              end();
              return;
            }
            for (const event of [e, ...queue.drain()]) {
              for (const chunk of reply.chunks(event)) {
                send(chunk);
                sent++;
              }
              if (event.type === "done") {
                if (reply.doneCount === 1) metrics.promptTokens += event.promptTokens;
                metrics.completionTokens += event.completionTokens;
                if (!reply.complete) continue;
                out += "data: [DONE]\n\n";
                flush();
                controller.close();
                end();
                return;
              }
            }
            flush();
          }
        } catch (error) {
          abort();
          controller.error(error);
        }
      },
      cancel() {
        // The client went away: its slot is freed at once.
        abort();
      },
    });
    return new Response(stream, {
      headers: {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "x-accel-buffering": "no",
      },
    });
  }
}

type TokenItem = { token: number; text: string; logprob: number; top?: TokenLogprob[] };

/** One choice of a response as its events arrive. */
interface Choice {
  text: string;
  tokens: TokenItem[];
  finishReason: string | null;
  completionTokens: number;
  /** Chat streams: the `role` delta went out. */
  sentRole: boolean;
}

/** Builds one request's response (its n choices): the whole object, or its SSE chunks. */
class Reply {
  readonly id: string;
  readonly created = Math.floor(Date.now() / 1000);
  readonly model: string;
  readonly choices: Choice[];
  /** `done` events received (the request is complete at n). */
  doneCount = 0;
  usage?: Record<string, unknown>;
  timings?: Record<string, number>;

  constructor(
    readonly kind: "chat" | "completion",
    readonly request: ParsedRequest,
    readonly promptTokens: number,
    modelId: string,
  ) {
    this.id = randomId(kind === "chat" ? "chatcmpl-" : "cmpl-");
    this.model = request.model ?? modelId;
    this.choices = Array.from({ length: request.input.n }, () => ({
      text: "",
      tokens: [],
      finishReason: null,
      completionTokens: 0,
      sentRole: false,
    }));
  }

  /** True once every choice is done. */
  get complete(): boolean {
    return this.doneCount >= this.choices.length;
  }

  #choiceOf(e: { index: number }): Choice {
    const c = this.choices[e.index];
    if (c === undefined) throw new ApiError(500, `the backend sent choice ${e.index}`);
    return c;
  }

  add(e: SequenceEvent): void {
    if (e.type === "token") {
      const c = this.#choiceOf(e);
      c.text += e.text;
      if (this.request.logprobs) c.tokens.push(e);
    } else if (e.type === "text") {
      this.#choiceOf(e).text += e.text;
    } else if (e.type === "done") {
      const c = this.#choiceOf(e);
      c.finishReason = e.finishReason;
      c.completionTokens = e.completionTokens;
      this.doneCount++;
      const completion = this.choices.reduce((sum, x) => sum + x.completionTokens, 0);
      this.usage = {
        prompt_tokens: e.promptTokens,
        completion_tokens: completion,
        total_tokens: e.promptTokens + completion,
        prompt_tokens_details: { cached_tokens: e.cachedTokens },
      };
      // llama.cpp's `timings` (the chat page shows tokens/s from them): of the last choice done.
      this.timings = {
        prompt_n: e.promptTokens - e.cachedTokens,
        prompt_ms: e.timings.prefillMs,
        predicted_n: completion,
        predicted_ms: e.timings.decodeMs,
        predicted_per_second: e.timings.decodeMs > 0 ? completion / (e.timings.decodeMs / 1000) : 0,
        queue_ms: e.timings.queueMs,
        // llama-server's speculation counters, present when it drafted.
        ...(e.timings.draftedTokens > 0
          ? { draft_n: e.timings.draftedTokens, draft_n_accepted: e.timings.acceptedTokens }
          : {}),
      };
    }
  }

  #logprobs(items: TokenItem[]) {
    if (!this.request.logprobs) return null;
    const bytes = (s: string) => [...encoder.encode(s)];
    if (this.kind === "chat") {
      return {
        content: items.map((t) => ({
          token: t.text,
          logprob: t.logprob,
          bytes: bytes(t.text),
          top_logprobs: (t.top ?? []).map((a) => ({
            token: a.text,
            logprob: a.logprob,
            bytes: bytes(a.text),
          })),
        })),
      };
    }
    return {
      tokens: items.map((t) => t.text),
      token_logprobs: items.map((t) => t.logprob),
      top_logprobs: items.map((t) =>
        Object.fromEntries((t.top ?? []).map((a) => [a.text, a.logprob]))
      ),
      text_offset: [] as number[],
    };
  }

  #choice(
    index: number,
    text: string,
    finish: string | null,
    logprobs: unknown,
    first: boolean,
  ) {
    if (this.kind === "chat") {
      const delta: Record<string, string> = {};
      if (first) delta.role = "assistant";
      if (text !== "" || first) delta.content = text;
      return { index, delta, logprobs, finish_reason: finish };
    }
    return { index, text, logprobs, finish_reason: finish };
  }

  #chunk(choices: unknown[], extra: Record<string, unknown> = {}) {
    return {
      id: this.id,
      object: this.kind === "chat" ? "chat.completion.chunk" : "text_completion",
      created: this.created,
      model: this.model,
      system_fingerprint: "dotllm",
      choices,
      ...(this.request.includeUsage ? { usage: null } : {}),
      ...extra,
    };
  }

  /** The SSE chunks for one event (each carries its choice's `index`). */
  chunks(e: SequenceEvent): unknown[] {
    this.add(e);
    const out: unknown[] = [];
    if (e.type !== "token" && e.type !== "text" && e.type !== "done") return out;
    const i = e.index;
    const c = this.#choiceOf(e);
    if (this.kind === "chat" && !c.sentRole) {
      c.sentRole = true;
      out.push(this.#chunk([this.#choice(i, "", null, null, true)]));
    }
    if (e.type === "token") {
      if (e.text !== "" || this.request.logprobs) {
        out.push(this.#chunk([this.#choice(i, e.text, null, this.#logprobs([e]), false)]));
      }
    } else if (e.type === "text") {
      out.push(this.#chunk([this.#choice(i, e.text, null, null, false)]));
    } else {
      out.push(this.#chunk([this.#choice(i, "", c.finishReason, null, false)], {
        timings: this.timings,
      }));
      if (this.complete && this.request.includeUsage) {
        out.push(this.#chunk([], { usage: this.usage }));
      }
    }
    return out;
  }

  /** The non-streamed response. */
  whole(): unknown {
    const choices = this.choices.map((c, index) => {
      const logprobs = this.#logprobs(c.tokens);
      return this.kind === "chat"
        ? {
          index,
          message: { role: "assistant", content: c.text },
          logprobs,
          finish_reason: c.finishReason,
        }
        : { index, text: c.text, logprobs, finish_reason: c.finishReason };
    });
    return {
      id: this.id,
      object: this.kind === "chat" ? "chat.completion" : "text_completion",
      created: this.created,
      model: this.model,
      system_fingerprint: "dotllm",
      choices,
      usage: this.usage,
      timings: this.timings,
    };
  }
}

export type { GenerateInput };

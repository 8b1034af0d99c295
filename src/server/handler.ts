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
import { CHAT_PAGE, CHAT_PAGE_HEADERS } from "./page.ts";
import { VERSION } from "../version.ts";
import {
  ApiError,
  parseApplyTemplateRequest,
  parseChatRequest,
  parseCompletionRequest,
  parseDetokenizeRequest,
  type ParsedRequest,
  parseTokenizeRequest,
  type RequestDefaults,
} from "./protocol.ts";
import type { SequenceEvent, TokenLogprob } from "./scheduler.ts";
import { type ChatPlan, planChat, templateOf } from "./chat_prompt.ts";
import { ChatInputError, ChatTemplateError } from "../chat/mod.ts";
import { SchemaError } from "../grammar/mod.ts";
import { ChatOutputStream, type ChunkDelta, type ParsedMessage } from "../tools/mod.ts";
import {
  NativeReply,
  type NativeRequest,
  nativeToParsed,
  parseNativeCompletion,
} from "./native/completion.ts";
import { infillPrompt, parseInfillRequest } from "./native/infill.ts";
import {
  modelId,
  modelsBody,
  type NativeOptions,
  notSupported,
  postProps,
  propsBody,
  slotsBody,
} from "./native/props.ts";

/** Options of an {@linkcode ApiHandler}. */
export interface HandlerOptions {
  backend: Backend;
  /** Required as `Authorization: Bearer KEY` on every route but `/health` and `/`. */
  apiKey?: string;
  /** The origin allowed by CORS (`*` for any); none by default. */
  cors?: string;
  /**
   * With `cors: "*"`: echo the request's `Origin` and allow credentials
   * (llama-server's default, `--cors-credentials`). `cors: "localhost"`
   * echoes only a loopback origin (`http://localhost[:port]`, 127.0.0.1, [::1]).
   */
  corsCredentials?: boolean;
  /**
   * Largest request body; default 1 MiB: a context of a few thousand tokens is
   * tens of kilobytes of text, and the body is held in memory while parsed.
   */
  bodyLimitBytes?: number;
  /** Requests that may wait for a slot beyond the running ones; default 64 (then 503). */
  queueLimit?: number;
  /** Defaults for fields a request leaves out (sampling, `max_tokens` cap, system message). */
  defaults?: RequestDefaults;
  /** llama-server's options: aliases, which native endpoints are on, the slot files' folder. */
  native?: NativeOptions;
}

/** What a generation's response is built by: OpenAI's shape, or llama-server's native one. */
interface ResponseBuilder {
  readonly complete: boolean;
  readonly doneCount: number;
  /** The stream ends with `data: [DONE]`. */
  readonly doneMarker: boolean;
  add(e: SequenceEvent): void;
  chunks(e: SequenceEvent): unknown[];
  whole(): unknown;
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
  "/completion": ["POST"],
  "/infill": ["POST"],
  "/chat/completions/input_tokens": ["POST"],
  "/v1/chat/completions/input_tokens": ["POST"],
  "/props": ["GET", "POST"],
  "/slots": ["GET"],
  "/slots/:id": ["POST"],
  "/tokenize": ["POST"],
  "/detokenize": ["POST"],
  "/apply-template": ["POST"],
  "/v1/embeddings": ["POST"],
  "/embeddings": ["POST"],
  "/embedding": ["POST"],
};

/** The ROUTES key of a path (`/slots/3` is `/slots/:id`). */
function routeKey(path: string): string {
  return /^\/slots\/[^/]+$/.test(path) ? "/slots/:id" : path;
}

/** A loopback origin (`cors: "localhost"`). */
const LOOPBACK_ORIGIN = /^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/;

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

/** llama-server's fingerprint shape (`b<build>-<commit>`), with dotllm's version. */
const SYSTEM_FINGERPRINT = `b${VERSION}-dotllm`;

/** The HTTP API over a backend. */
export class ApiHandler {
  readonly backend: Backend;
  readonly metrics = new Metrics();
  readonly #options: HandlerOptions;
  readonly #bodyLimit: number;
  readonly #queueLimit: number;
  readonly #native: NativeOptions;
  #inFlight = 0;
  #draining = false;
  #idle?: () => void;

  constructor(options: HandlerOptions) {
    this.backend = options.backend;
    this.#options = options;
    this.#bodyLimit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
    this.#queueLimit = options.queueLimit ?? DEFAULT_QUEUE_LIMIT;
    this.#native = options.native ?? {};
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
    const key = routeKey(url.pathname);
    const route = ROUTES[key] !== undefined ? key : "other";
    let response: Response;
    try {
      response = await this.#route(request, key);
    } catch (error) {
      response = this.#error(
        error instanceof ApiError
          ? error
          : new ApiError(500, `internal error: ${(error as Error)?.message ?? error}`),
      );
    }
    this.metrics.request(route, response.status);
    const allow = this.#allowOrigin(request);
    if (allow !== undefined) {
      response.headers.set("access-control-allow-origin", allow);
      if (allow !== "*") response.headers.append("vary", "Origin");
    }
    return response;
  };

  /** The `Access-Control-Allow-Origin` of a request's response, as llama-server decides it. */
  #allowOrigin(request: Request): string | undefined {
    const cors = this.#options.cors;
    if (cors === undefined) return undefined;
    const origin = request.headers.get("origin");
    if (cors === "*" && this.#options.corsCredentials) return origin ?? undefined;
    if (cors === "localhost") {
      return origin !== null && LOOPBACK_ORIGIN.test(origin) ? origin : undefined;
    }
    return cors;
  }

  #error(error: ApiError, headers: Record<string, string> = {}): Response {
    return Response.json(error.toJSON(), { status: error.status, headers });
  }

  async #route(request: Request, path: string): Promise<Response> {
    const methods = ROUTES[path];
    if (methods === undefined) {
      throw new ApiError(404, `no route ${request.method} ${path}`, null, "not_found");
    }
    if (request.method === "OPTIONS" && this.#options.cors !== undefined) {
      // llama-server's preflight answer
      return new Response(null, {
        status: 200,
        headers: {
          "access-control-allow-credentials": this.#options.corsCredentials ? "true" : "false",
          "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
          "access-control-allow-headers": "*",
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
      // llama-server also takes the key as `X-Api-Key`
      const auth = request.headers.get("authorization") ??
        (request.headers.has("x-api-key") ? `Bearer ${request.headers.get("x-api-key")}` : "");
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
        if (this.#native.page === false) {
          throw new ApiError(404, "the page is off (--no-webui)", null, "not_found");
        }
        return new Response(CHAT_PAGE, { headers: CHAT_PAGE_HEADERS });
      case "/health":
      case "/v1/health":
        return Response.json({ status: "ok" });
      case "/metrics":
        if (this.#native.metrics === false) {
          throw notSupported("the /metrics endpoint", "--metrics");
        }
        return new Response(this.metrics.render(await this.backend.stats(), this.#inFlight), {
          headers: {
            "content-type": "text/plain; version=0.0.4; charset=utf-8",
            "process-start-time-unix": String(this.backend.info.created),
          },
        });
      case "/v1/models":
      case "/models":
        return Response.json(modelsBody(this.backend.info, this.#native));
      case "/props":
        if (request.method === "POST") {
          return Response.json(postProps(this.#native, await this.#json(request)));
        }
        return Response.json(
          propsBody(
            this.backend.info,
            this.#native,
            this.#options.defaults ?? {},
            this.backend.info.chat.source ?? "",
          ),
        );
      case "/slots":
        return Response.json(
          slotsBody(this.backend.info, this.#native, await this.backend.stats()),
        );
      case "/slots/:id":
        return this.#slotAction(request);
      case "/tokenize": {
        const t = parseTokenizeRequest(await this.#json(request));
        const tokens = await this.backend.tokenize(t.content, t.addSpecial, t.parseSpecial);
        if (!t.withPieces) return Response.json({ tokens });
        // llama-server: each token's piece as text, or its bytes when they are not UTF-8 alone
        const pieces = await this.backend.pieces(tokens);
        return Response.json({
          tokens: tokens.map((id, i) => ({ id, piece: utf8OrBytes(pieces[i]) })),
        });
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
        // As a chat request renders it: tools, template kwargs, reasoning, the server's defaults.
        const body = await this.#json(request);
        const { chat, addGenerationPrompt } = parseApplyTemplateRequest(
          body,
          this.#options.defaults ?? {},
        );
        try {
          const prompt = templateOf(this.backend.info.chat).render(chat.messages, {
            addGenerationPrompt,
            tools: chat.tools,
            chatTemplateKwargs: chat.chatTemplateKwargs,
            enableThinking: chat.enableThinking,
            reasoningEffort: chat.reasoningEffort,
          });
          return Response.json({ prompt });
        } catch (error) {
          throw new ApiError(400, `chat template: ${(error as Error).message}`, "messages");
        }
      }
      case "/v1/embeddings":
      case "/embeddings":
      case "/embedding":
        // llama-server: /embedding and /embeddings answer in its own shape, /v1/embeddings in OpenAI's
        return this.#embed(request, path !== "/v1/embeddings");
      case "/v1/chat/completions":
      case "/chat/completions":
        return this.#generate(request, "chat");
      case "/completion":
      case "/completions":
        return this.#completion(request);
      case "/infill":
        return this.#infill(request);
      case "/chat/completions/input_tokens":
      case "/v1/chat/completions/input_tokens": {
        // llama-server: the prompt tokens a chat request would have, without generating
        const info = this.backend.info;
        const parsed = parseChatRequest(await this.#json(request), this.#options.defaults ?? {}, {
          maxChoices: info.slotCount,
          vocabSize: info.vocabSize,
        });
        const text = this.#plan(parsed).prompt; // with the request's tools and kwargs
        return Response.json({
          input_tokens: (await this.backend.tokenize(text, true, true)).length,
        });
      }
      default:
        return this.#generate(request, "completion");
    }
  }

  /** `POST /slots/ID?action=save|restore|erase` (llama-server's shapes). */
  async #slotAction(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const id = Number(url.pathname.slice("/slots/".length));
    const n = this.backend.info.slotCount;
    if (!Number.isInteger(id) || id < 0 || id >= n) {
      throw new ApiError(400, `id_slot: expected a slot id in [0, ${n})`, "id_slot");
    }
    const action = url.searchParams.get("action");
    if (action !== "save" && action !== "restore" && action !== "erase") {
      throw new ApiError(400, "action: expected save, restore or erase", "action");
    }
    if (this.#native.slots === false) throw notSupported("the /slots endpoint", "--slots");
    if (action === "erase") {
      const r = await this.#slotCall(() => this.backend.slotAction("erase", id));
      return Response.json({ id_slot: id, n_erased: r.tokens });
    }
    const dir = this.#native.slotSavePath;
    if (dir === undefined) throw notSupported(`slot ${action}`, "--slot-save-path DIR");
    const body = await this.#json(request) as Record<string, unknown> | null;
    const filename = body?.filename;
    if (
      typeof filename !== "string" || filename === "" || filename === "." || filename === ".." ||
      filename.length > 255 || /[/\\\0]/.test(filename)
    ) {
      throw new ApiError(400, "filename: expected a plain file name", "filename", "invalid_value");
    }
    const path = dir.replace(/\/+$/, "") + "/" + filename;
    const r = await this.#slotCall(() => this.backend.slotAction(action, id, path));
    return Response.json(
      action === "save"
        ? {
          id_slot: id,
          filename,
          n_saved: r.tokens,
          n_written: r.bytes,
          timings: { save_ms: r.ms },
        }
        : {
          id_slot: id,
          filename,
          n_restored: r.tokens,
          n_read: r.bytes,
          timings: { restore_ms: r.ms },
        },
    );
  }

  /** A slot action's failure is the client's (a busy slot, a bad file): 400 with its one line. */
  async #slotCall<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (error) {
      throw new ApiError(400, (error as Error).message.split("\n")[0], null, "invalid_value");
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
      const tokens = out.promptTokens.reduce((a, b) => a + b, 0);
      this.metrics.promptTokens += tokens;
      this.metrics.embeddingTokens += tokens;
      this.metrics.embeddingBatches++;
      return Response.json(embeddingResponse(parsed, out, this.backend.info.id));
    } finally {
      this.#inFlight--;
      if (this.#inFlight === 0) this.#idle?.();
    }
  }

  /**
   * A chat request's prompt, tool-call constraint and stops, from the
   * model's template (rendered here, on the HTTP thread); `parsed.input` is
   * set to generate from the rendered text.
   */
  #plan(parsed: ParsedRequest): ChatPlan {
    let plan: ChatPlan;
    try {
      plan = planChat(templateOf(this.backend.info.chat), parsed.chat!);
    } catch (error) {
      if (error instanceof SchemaError) throw new ApiError(400, `tools: ${error.message}`, "tools");
      if (error instanceof ChatInputError) throw new ApiError(400, error.message, "messages");
      if (error instanceof ChatTemplateError) {
        throw new ApiError(400, `chat template: ${error.message}`, "messages");
      }
      throw error;
    }
    const input = parsed.input;
    parsed.input = {
      ...input,
      prompt: { text: plan.prompt },
      stop: [...input.stop, ...plan.stops],
      grammar: input.grammar ?? plan.grammar,
      grammarTriggers: plan.grammarTriggers,
      triggerPrefix: plan.triggerPrefix,
    };
    return plan;
  }

  async #generate(request: Request, kind: "chat" | "completion"): Promise<Response> {
    if (this.#draining) return this.#shuttingDown();
    const json = await this.#json(request);
    const defaults = this.#options.defaults ?? {};
    const info = this.backend.info;
    const limits = { maxChoices: info.slotCount, vocabSize: info.vocabSize };
    const parsed = kind === "chat"
      ? parseChatRequest(json, defaults, limits)
      : parseCompletionRequest(json, defaults, limits);
    const plan = parsed.chat === undefined ? undefined : this.#plan(parsed);
    const model = parsed.model ?? modelId(info, this.#native);
    return this.#run(
      request,
      parsed,
      (promptTokens) => new Reply(kind, parsed, promptTokens, model, plan),
    );
  }

  #shuttingDown(): Response {
    return this.#error(new ApiError(503, "the server is shutting down", null, "unavailable"), {
      "retry-after": "5",
    });
  }

  /**
   * llama-server's `/completion`: each prompt (text, ids, or ids and text)
   * becomes tokens here (its `prompt` text echoes them), then runs as one
   * generation; several prompts answer as an array, in order.
   */
  async #completion(request: Request, body?: unknown): Promise<Response> {
    if (this.#draining) return this.#shuttingDown();
    const req: NativeRequest = parseNativeCompletion(body ?? await this.#json(request));
    const defaults = this.#options.defaults ?? {};
    const info = this.backend.info;
    const limits = { maxChoices: info.slotCount, vocabSize: info.vocabSize };
    const bias: Array<[number, number | false]> = [...req.biasIds];
    for (const [text, b] of req.biasStrings) {
      for (const id of await this.backend.tokenize(text, false, false)) bias.push([id, b]);
    }
    if (req.prompts.length > 1 && req.stream) {
      throw new ApiError(400, "prompt: stream one prompt per request", "prompt");
    }
    const model = modelId(info, this.#native);
    const one = async (p: NativeRequest["prompts"][number], index: number) => {
      let tokens: number[];
      if ("tokens" in p) tokens = p.tokens;
      else if ("text" in p) tokens = await this.backend.tokenize(p.text, true, true);
      else if ("mixed" in p) {
        tokens = [];
        for (const [i, part] of p.mixed.entries()) {
          if (typeof part === "number") tokens.push(part);
          else tokens.push(...await this.backend.tokenize(part, i === 0, true));
        }
      } else throw new ApiError(400, "prompt: expected text or token ids", "prompt");
      let text: string;
      try {
        text = new TextDecoder().decode(
          Uint8Array.from((await this.backend.pieces(tokens)).flat()),
        );
      } catch (error) {
        throw new ApiError(400, `prompt: ${(error as Error).message}`, "prompt", "invalid_value");
      }
      const parsed = nativeToParsed(req, { tokens }, bias, defaults, limits);
      return this.#run(
        request,
        parsed,
        (n) => new NativeReply(req, parsed, text, n, model, index),
      );
    };
    if (req.prompts.length === 1) return one(req.prompts[0], 0);
    const responses = await Promise.all(req.prompts.map(one));
    const failed = responses.find((r) => r.status !== 200);
    if (failed !== undefined) return failed;
    return Response.json(await Promise.all(responses.map((r) => r.json())));
  }

  /** llama-server's `/infill`: the FIM prompt built as llama.cpp does, then `/completion`. */
  async #infill(request: Request): Promise<Response> {
    if (this.#draining) return this.#shuttingDown();
    const req = parseInfillRequest(await this.#json(request));
    const info = this.backend.info;
    if (info.infill === undefined) {
      throw new ApiError(501, "this backend cannot build infill prompts", null, "not_supported");
    }
    const tokens = await infillPrompt(req, {
      ...info.infill,
      contextSize: info.contextSize,
      nPredict: this.#options.defaults?.maxTokens ?? -1,
      tokenize: (text) => this.backend.tokenize(text, false, false),
    });
    return this.#completion(request, { ...req.rest, prompt: tokens });
  }

  /** Runs one parsed generation request, answered whole or streamed by the builder `make` gives. */
  async #run(
    request: Request,
    parsed: ParsedRequest,
    make: (promptTokens: number) => ResponseBuilder,
  ): Promise<Response> {
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
          null,
          first.errorType,
          first.extra,
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
      const reply = make(first.promptTokens);
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

  #stream(reply: ResponseBuilder, queue: EventQueue, abort: () => void, end: () => void): Response {
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
                if (reply.doneMarker) out += "data: [DONE]\n\n";
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
  /** Chat: the output parsed into content, reasoning and tool calls as it grows. */
  output?: ChatOutputStream;
  /** Chat: the final message (set at `done`). */
  message?: ParsedMessage;
}

/** Builds one request's response (its n choices): the whole object, or its SSE chunks. */
class Reply implements ResponseBuilder {
  readonly doneMarker = true;
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
    model: string,
    plan?: ChatPlan,
  ) {
    this.id = randomId(kind === "chat" ? "chatcmpl-" : "cmpl-");
    this.model = model;
    this.choices = Array.from({ length: request.input.n }, () => ({
      text: "",
      tokens: [],
      finishReason: null,
      completionTokens: 0,
      sentRole: false,
      output: plan === undefined
        ? undefined
        : new ChatOutputStream(plan.output, undefined, plan.echo),
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

  /**
   * Takes one event into its choice; returns a chat choice's new deltas (the
   * output parsed again: content, reasoning and tool calls), or undefined for
   * a choice whose text is streamed as it comes.
   */
  add(e: SequenceEvent): ChunkDelta[] | undefined {
    if (e.type === "token" || e.type === "text") {
      const c = this.#choiceOf(e);
      c.text += e.text;
      if (e.type === "token" && this.request.logprobs) c.tokens.push(e);
      return c.output?.push(e.text);
    } else if (e.type === "done") {
      const c = this.#choiceOf(e);
      let deltas: ChunkDelta[] | undefined;
      if (c.output !== undefined) {
        const final = c.output.finish();
        c.message = final.message;
        deltas = final.deltas;
      }
      // llama-server: a reply that ends with calls ends for them
      c.finishReason = e.finishReason === "stop" && (c.message?.toolCalls.length ?? 0) > 0
        ? "tool_calls"
        : e.finishReason;
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
      return deltas;
    }
    return undefined;
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
      const delta: Record<string, string | null> = {};
      if (first) delta.role = "assistant";
      // llama-server's first chunk: the role, and `content: null`
      if (first) delta.content = null;
      else if (text !== "") delta.content = text;
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
      system_fingerprint: SYSTEM_FINGERPRINT,
      choices,
      ...(this.request.includeUsage ? { usage: null } : {}),
      ...extra,
    };
  }

  /** The SSE chunks for one event (each carries its choice's `index`). */
  chunks(e: SequenceEvent): unknown[] {
    const deltas = this.add(e);
    const out: unknown[] = [];
    if (e.type !== "token" && e.type !== "text" && e.type !== "done") return out;
    const i = e.index;
    const c = this.#choiceOf(e);
    if (this.kind === "chat" && !c.sentRole) {
      c.sentRole = true;
      out.push(this.#chunk([this.#choice(i, "", null, null, true)]));
    }
    if (deltas !== undefined) {
      // a parsed chat output: one chunk per delta, the token's logprobs on the first
      let logprobs = e.type === "token" ? this.#logprobs([e]) : null;
      for (const delta of deltas) {
        out.push(this.#chunk([{ index: i, delta, logprobs, finish_reason: null }]));
        logprobs = null;
      }
      if (logprobs !== null) {
        out.push(this.#chunk([{ index: i, delta: {}, logprobs, finish_reason: null }]));
      }
      if (e.type !== "done") return out;
    } else if (e.type === "token") {
      if (e.text !== "" || this.request.logprobs) {
        out.push(this.#chunk([this.#choice(i, e.text, null, this.#logprobs([e]), false)]));
      }
    } else if (e.type === "text") {
      out.push(this.#chunk([this.#choice(i, e.text, null, null, false)]));
    }
    if (e.type === "done") {
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
          message: c.message === undefined
            ? { role: "assistant", content: c.text }
            : chatMessageJson(c.message),
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
      system_fingerprint: SYSTEM_FINGERPRINT,
      choices,
      usage: this.usage,
      timings: this.timings,
    };
  }
}

/**
 * A parsed reply as OpenAI's `message`: `content` (null when the reply is
 * only tool calls), `reasoning_content` when there is some, `tool_calls`.
 */
function chatMessageJson(m: ParsedMessage): Record<string, unknown> {
  const out: Record<string, unknown> = {
    role: "assistant",
    content: m.content === "" && m.toolCalls.length > 0 ? null : m.content,
  };
  if (m.reasoningContent !== "") out.reasoning_content = m.reasoningContent;
  if (m.toolCalls.length > 0) {
    out.tool_calls = m.toolCalls.map((t) => ({
      type: "function",
      function: { name: t.name, arguments: t.arguments },
      id: t.id,
    }));
  }
  return out;
}

/** A piece's bytes as text when they are valid UTF-8, else as the byte values (llama-server). */
function utf8OrBytes(bytes: number[]): string | number[] {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes));
  } catch {
    return bytes;
  }
}

export type { GenerateInput };

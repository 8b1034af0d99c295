/**
 * A {@linkcode Backend} whose model runs in a Worker (`worker.ts`): the HTTP
 * event loop only parses, routes and streams, so `/health` answers at once
 * while the model computes.
 *
 * @module
 */
import type { EmbedInput, EmbedOutput } from "./embeddings.ts";
import type { Backend, GenerateInput, ModelInfo, SlotAction, SlotActionResult } from "./backend.ts";
import { type ChatRenderer, chatRenderer } from "./chat_prompt.ts";
import type { LoadOptions } from "./load.ts";
import type { SchedulerStats, SequenceEvent } from "./scheduler.ts";
import type { WorkerRequest } from "./worker.ts";

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/** The model in a Worker. */
export class WorkerBackend implements Backend {
  readonly info: ModelInfo;
  readonly #worker: Worker;
  readonly #render: ChatRenderer;
  readonly #calls = new Map<number, Pending>();
  /** Each running generation's listener and its choices not yet done. */
  readonly #streams = new Map<number, { emit: (event: SequenceEvent) => void; open: number }>();
  /** Messages posted to the worker and not yet received by it (it decrements). */
  readonly #inbox: Int32Array;
  #nextId = 1;

  private constructor(worker: Worker, info: ModelInfo, inbox: Int32Array) {
    this.#worker = worker;
    this.#inbox = inbox;
    this.info = info;
    this.#render = chatRenderer(info.chat);
    worker.onmessage = (e: MessageEvent) => {
      const m = e.data;
      if (m.events !== undefined) {
        for (const [id, event] of m.events as Array<[number, SequenceEvent]>) {
          const stream = this.#streams.get(id);
          if (stream === undefined) continue; // cancelled
          if (event.type === "error" || (event.type === "done" && --stream.open === 0)) {
            this.#streams.delete(id);
          }
          stream.emit(event);
        }
        return;
      }
      const call = this.#calls.get(m.id);
      if (call === undefined) return;
      this.#calls.delete(m.id);
      if (m.error !== undefined) call.reject(new Error(m.error));
      else call.resolve(m.result);
    };
  }

  /** Starts the worker and loads `path` in it; rejects with the loader's message. */
  static start(path: string, options: LoadOptions): Promise<WorkerBackend> {
    // In a `bun build --compile` executable every module shares the bundle's URL and the
    // worker is the extra entry point `src/server/worker.ts` (scripts/compile.ts).
    const url = import.meta.url.includes("$bunfs")
      ? "./src/server/worker.ts"
      : new URL("./worker.ts", import.meta.url);
    const worker = new Worker(url, { type: "module" });
    const inbox = new Int32Array(new SharedArrayBuffer(4));
    return new Promise((resolve, reject) => {
      worker.onerror = (e: ErrorEvent) => {
        e.preventDefault?.();
        worker.terminate();
        reject(new Error(e.message ?? "the model worker failed"));
      };
      worker.onmessage = (e: MessageEvent) => {
        if (e.data.op === "ready") resolve(new WorkerBackend(worker, e.data.info, inbox));
        else if (e.data.op === "loadError") {
          worker.terminate();
          reject(new Error(e.data.message));
        }
      };
      worker.postMessage(
        { op: "load", path, options: { ...options, inbox } } satisfies WorkerRequest,
      );
    });
  }

  /** Posts to the worker, counted first: its step loop then lets the message in. */
  #post(request: WorkerRequest): void {
    Atomics.add(this.#inbox, 0, 1);
    this.#worker.postMessage(request);
  }

  #call<T>(request: Record<string, unknown> & { op: string }): Promise<T> {
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#calls.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#post({ ...request, id } as WorkerRequest);
    });
  }

  generate(input: GenerateInput, onEvent: (event: SequenceEvent) => void): () => void {
    if ("messages" in input.prompt) {
      // Rendered here: the Worker only tokenizes and computes.
      try {
        const { messages, enableThinking } = input.prompt;
        input = { ...input, prompt: { text: this.#render(messages, true, enableThinking) } };
      } catch (error) {
        onEvent({
          type: "error",
          status: 400,
          message: `chat template: ${(error as Error).message}`,
        });
        return () => {};
      }
    }
    const id = this.#nextId++;
    this.#streams.set(id, { emit: onEvent, open: input.n });
    this.#post({ op: "generate", id, input });
    return () => {
      if (!this.#streams.delete(id)) return;
      this.#post({ op: "cancel", id });
    };
  }

  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Promise<number[]> {
    return this.#call({ op: "tokenize", text, addSpecial, parseSpecial });
  }

  detokenize(tokens: number[]): Promise<string> {
    return this.#call({ op: "detokenize", tokens });
  }

  slotAction(action: SlotAction, slot: number, path?: string): Promise<SlotActionResult> {
    return this.#call({ op: "slot", action, slot, path });
  }

  pieces(tokens: number[]): Promise<number[][]> {
    return this.#call({ op: "pieces", tokens });
  }

  stats(): Promise<SchedulerStats> {
    return this.#call({ op: "stats" });
  }

  embed(input: EmbedInput): Promise<EmbedOutput> {
    return this.#call({ op: "embed", input });
  }

  /** Frees the model in the worker, then ends the worker. */
  async close(): Promise<void> {
    try {
      await this.#call({ op: "close" });
    } finally {
      this.#worker.terminate();
    }
  }
}

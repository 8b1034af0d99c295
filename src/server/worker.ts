/**
 * The model Worker: owns the engine and the scheduler, so the forward pass
 * never blocks the HTTP event loop. Talks to `WorkerBackend` in messages:
 * `{ op, id, ... }` in; out, `{ id, result | error }` for calls and
 * `{ events: [[id, event], ...] }` for generation: every event of one
 * scheduler step in one message (a step emits one token per live sequence),
 * so the HTTP thread wakes once per step, not once per token.
 *
 * @module
 */
import type { LocalBackend } from "./backend.ts";
import { loadBackend } from "./load.ts";

/** A request to the worker. */
export type WorkerRequest =
  | { op: "load"; path: string; options: import("./load.ts").LoadOptions }
  | { op: "generate"; id: number; input: import("./backend.ts").GenerateInput }
  | { op: "cancel"; id: number }
  | { op: "tokenize"; id: number; text: string; addSpecial: boolean; parseSpecial: boolean }
  | { op: "detokenize"; id: number; tokens: number[] }
  | { op: "pieces"; id: number; tokens: number[] }
  | {
    op: "slot";
    id: number;
    action: import("./backend.ts").SlotAction;
    slot: number;
    path?: string;
  }
  | { op: "stats"; id: number }
  | { op: "embed"; id: number; input: import("./embeddings.ts").EmbedInput }
  | { op: "close"; id: number };

// deno-lint-ignore no-explicit-any
const scope = self as any;
let backend: LocalBackend | undefined;
const cancels = new Map<number, () => void>();

/** Generation events not yet posted: flushed in one message once the current task ends. */
let outbox: Array<[number, unknown]> = [];

function flush(): void {
  const events = outbox;
  outbox = [];
  scope.postMessage({ events });
}

function post(id: number, event: unknown): void {
  if (outbox.length === 0) queueMicrotask(flush); // after the synchronous step that emits
  outbox.push([id, event]);
}

function reply(id: number, promise: Promise<unknown>): void {
  promise.then(
    (result) => scope.postMessage({ id, result }),
    (error) => scope.postMessage({ id, error: (error as Error)?.message ?? String(error) }),
  );
}

/** Messages the HTTP thread posted and this thread has not received yet (see `LocalBackend`). */
let inbox: Int32Array | undefined;

scope.onmessage = async (e: MessageEvent<WorkerRequest>) => {
  const m = e.data;
  if (m.op !== "load" && inbox !== undefined) Atomics.sub(inbox, 0, 1);
  if (m.op === "load") {
    inbox = m.options.inbox;
    try {
      backend = await loadBackend(m.path, m.options);
      scope.postMessage({ op: "ready", info: backend.info });
    } catch (error) {
      scope.postMessage({ op: "loadError", message: (error as Error)?.message ?? String(error) });
    }
    return;
  }
  const b = backend!;
  switch (m.op) {
    case "generate": {
      let open = m.input.n; // choices not yet done
      const cancel = b.generate(m.input, (event) => {
        if (event.type === "error" || (event.type === "done" && --open === 0)) cancels.delete(m.id);
        post(m.id, event);
      });
      cancels.set(m.id, cancel);
      return;
    }
    case "cancel":
      cancels.get(m.id)?.();
      cancels.delete(m.id);
      return;
    case "tokenize":
      return reply(m.id, b.tokenize(m.text, m.addSpecial, m.parseSpecial));
    case "detokenize":
      return reply(m.id, b.detokenize(m.tokens));
    case "slot":
      return reply(m.id, b.slotAction(m.action, m.slot, m.path));
    case "pieces":
      return reply(m.id, b.pieces(m.tokens));
    case "stats":
      return reply(m.id, b.stats());
    case "embed":
      return reply(m.id, b.embed(m.input));
    case "close":
      return reply(m.id, b.close());
  }
};

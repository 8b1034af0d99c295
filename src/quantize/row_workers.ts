/**
 * Extra threads for `dotllm quantize`: workers that each open the same native
 * library and convert a range of rows (dequantize, then quantize) between
 * buffers the main thread allocated. Every block is converted independently,
 * so the bytes do not depend on how rows are split (llama-quantize's thread
 * count does not change its output either).
 *
 * @example
 * ```ts ignore
 * import { RowWorkers } from "./row_workers.ts";
 * const workers = await RowWorkers.start(native.path, 1); // undefined where workers cannot run
 * await workers?.convert({ srcType: 0, src, dstType: 8, f32, dst, n: 4096 });
 * workers?.close();
 * ```
 *
 * @module
 */

/** One conversion: `n` elements from `src` (type `srcType`) via `f32` to `dst` (`dstType`). */
export interface RowTask {
  readonly srcType: number;
  readonly src: number;
  readonly dstType: number;
  readonly f32: number;
  readonly dst: number;
  readonly n: number;
}

/** How long a worker may take to open the library before it is given up (a reason: a worker that cannot load, as in some single executables, must not hang the command). */
const OPEN_TIMEOUT_MS = 10_000;

/** A set of workers; `convert` runs a task on the next free one. */
export class RowWorkers {
  #workers: Worker[];
  #free: Worker[];
  #waiting: Array<(w: Worker) => void> = [];
  #pending = new Map<number, (status: number) => void>();
  #nextId = 1;

  private constructor(workers: Worker[]) {
    this.#workers = workers;
    this.#free = [...workers];
    for (const w of workers) {
      w.onmessage = (event: MessageEvent) => {
        const { id, status } = event.data as { id: number; status: number };
        const resolve = this.#pending.get(id);
        this.#pending.delete(id);
        resolve?.(status);
      };
    }
  }

  /** Number of workers. */
  get size(): number {
    return this.#workers.length;
  }

  /**
   * Starts `count` workers on the library at `libraryPath`; undefined (and no
   * worker left running) when any of them cannot start.
   */
  static async start(libraryPath: string, count: number): Promise<RowWorkers | undefined> {
    if (count <= 0) return undefined;
    const workers: Worker[] = [];
    try {
      const url = new URL("./_row_worker.ts", import.meta.url);
      for (let i = 0; i < count; i++) workers.push(new Worker(url.href, { type: "module" }));
      const opened = await Promise.all(workers.map((w) =>
        new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), OPEN_TIMEOUT_MS);
          w.onmessage = (event: MessageEvent) => {
            clearTimeout(timer);
            resolve((event.data as { status: number }).status === 0);
          };
          w.onerror = (event: Event) => {
            clearTimeout(timer);
            event.preventDefault?.();
            resolve(false);
          };
          w.postMessage({ kind: "open", id: 0, path: libraryPath });
        })
      ));
      if (opened.every(Boolean)) return new RowWorkers(workers);
    } catch {
      // No workers in this runtime or executable: the caller converts on its own thread.
    }
    for (const w of workers) w.terminate();
    return undefined;
  }

  /** Converts on a worker; resolves to 0, -1 (dequantize refused) or -2 (quantize refused). */
  async convert(task: RowTask): Promise<number> {
    const worker = this.#free.pop() ?? await new Promise<Worker>((r) => this.#waiting.push(r));
    try {
      const id = this.#nextId++;
      return await new Promise<number>((resolve) => {
        this.#pending.set(id, resolve);
        worker.postMessage({ kind: "convert", id, ...task });
      });
    } finally {
      const next = this.#waiting.shift();
      if (next !== undefined) next(worker);
      else this.#free.push(worker);
    }
  }

  /** Stops every worker. */
  close(): void {
    for (const w of this.#workers) w.terminate();
    this.#workers = [];
    this.#free = [];
  }
}

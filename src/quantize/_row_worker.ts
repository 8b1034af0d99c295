/**
 * A worker of `RowWorkers`: opens the same native library and converts row
 * ranges (dequantize to f32, then quantize) at addresses the main thread owns.
 *
 * @module
 */
import { Native } from "../native/native.ts";

interface WorkerScope {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
}

const scope = globalThis as unknown as WorkerScope;
let native: Native | undefined;

scope.onmessage = (event: MessageEvent) => {
  const m = event.data;
  if (m.kind === "open") {
    try {
      native = new Native(m.path);
      scope.postMessage({ id: m.id, status: 0 });
    } catch (error) {
      scope.postMessage({ id: m.id, status: -3, error: String(error) });
    }
    return;
  }
  if (native === undefined) {
    scope.postMessage({ id: m.id, status: -3, error: "library not open" });
    return;
  }
  const d = native.fn.dotllm_dequantize_row(m.srcType, m.src, m.f32, m.n);
  const q = d === 0 ? native.fn.dotllm_quantize_row(m.dstType, m.f32, m.dst, m.n) : 0;
  scope.postMessage({ id: m.id, status: d !== 0 ? -1 : q !== 0 ? -2 : 0 });
};

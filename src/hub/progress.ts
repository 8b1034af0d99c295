/**
 * The download progress line on stderr (only when stderr is a terminal):
 * `dotllm: FILE  42% 105/250 MiB  85.3 MiB/s  ETA 2s`, redrawn at most every
 * 100 ms and erased when done.
 *
 * @module
 */
import { stderrIsTerminal, writeStderr } from "../stdio.ts";

/** Redraw interval: often enough to look live, rare enough to cost nothing. */
const INTERVAL_MS = 100;
const MIB = 1 << 20;

/** Receives byte counts as a download goes. */
export interface ProgressSink {
  /** `done_bytes` so far (including resumed bytes) of `total_bytes` (0 if unknown). */
  update(done_bytes: number): void;
  /** Called once at the end: erases the line, and on success prints a summary. */
  finish(ok: boolean): void;
}

/** A sink that draws nothing. */
export const noProgress: ProgressSink = { update() {}, finish() {} };

function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  if (seconds < 60) return `${Math.ceil(seconds)}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${String(Math.ceil(seconds % 60)).padStart(2, "0")}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, "0")}m`;
}

/** The progress line text (exported for tests). */
export function progressLine(
  label: string,
  done_bytes: number,
  total_bytes: number,
  speed_bytes_per_s: number,
): string {
  const mib = (n: number) => (n / MIB).toFixed(n < 10 * MIB ? 1 : 0);
  const speed = `${(speed_bytes_per_s / MIB).toFixed(1)} MiB/s`;
  if (total_bytes <= 0) return `dotllm: ${label}  ${mib(done_bytes)} MiB  ${speed}`;
  const percent = Math.min(100, Math.floor((done_bytes / total_bytes) * 100));
  const eta = speed_bytes_per_s > 0 ? (total_bytes - done_bytes) / speed_bytes_per_s : Infinity;
  return `dotllm: ${label} ${String(percent).padStart(3)}% ${mib(done_bytes)}/${
    mib(total_bytes)
  } MiB  ${speed}  ETA ${formatSeconds(eta)}`;
}

/** A terminal progress line for one file, or {@link noProgress} when stderr is not a terminal. */
export function progressFor(label: string, total_bytes: number, start_bytes: number): ProgressSink {
  if (!stderrIsTerminal()) return noProgress;
  const started = performance.now();
  let last = 0;
  let width = 0;
  let latest = start_bytes;
  const draw = () => {
    const seconds = (performance.now() - started) / 1000;
    const speed = seconds > 0 ? (latest - start_bytes) / seconds : 0;
    const line = progressLine(label, latest, total_bytes, speed);
    writeStderr("\r" + line.padEnd(width));
    width = line.length;
  };
  return {
    update(done_bytes) {
      latest = done_bytes;
      const now = performance.now();
      if (now - last < INTERVAL_MS) return;
      last = now;
      draw();
    },
    finish(ok) {
      if (width > 0) writeStderr("\r" + " ".repeat(width) + "\r");
      if (!ok) return;
      const seconds = (performance.now() - started) / 1000;
      const mib = ((latest - start_bytes) / MIB).toFixed(1);
      writeStderr(`dotllm: pulled ${label} (${mib} MiB in ${seconds.toFixed(1)} s)\n`);
    },
  };
}

/**
 * What the CLI may decorate on stderr: colour only when stderr is a terminal
 * and `NO_COLOR` is unset or empty (https://no-color.org) and `TERM` is not
 * `dumb`; progress lines only when stderr is a terminal. Piped or redirected
 * stderr gets plain lines only.
 *
 * @module
 */
import process from "node:process";
import { stderrIsTerminal, writeStderr } from "../stdio.ts";

export { stderrIsTerminal };

/** True when stderr may carry ANSI colour. */
export function colorEnabled(): boolean {
  const noColor = process.env.NO_COLOR;
  if (noColor !== undefined && noColor !== "") return false;
  return process.env.TERM !== "dumb" && stderrIsTerminal();
}

/** `text` in bold red when colour is enabled, else unchanged. */
export function errorStyle(text: string): string {
  return colorEnabled() ? `\x1b[1;31m${text}\x1b[0m` : text;
}

const PAGE_BYTES = 4096;
/** Files smaller than this warm up without a progress line. */
const PROGRESS_MIN_BYTES = 64 << 20;
const PROGRESS_INTERVAL_MS = 100;

/**
 * Touches one byte per page of a mapped file, so the pages are resident
 * before the first forward pass (load time is then paid at load, not in the
 * first prompt's timing). While it runs on a large file, a progress line
 * (`dotllm: loading NAME  42% (560/1300 MiB)`) is redrawn on stderr when
 * stderr is a terminal, and erased when done. Returns a checksum of the
 * touched bytes, so the reads cannot be optimised away.
 */
export function warmUp(bytes: Uint8Array, label: string): number {
  const show = bytes.length >= PROGRESS_MIN_BYTES && stderrIsTerminal();
  const totalMib = Math.round(bytes.length / (1 << 20));
  let lastDraw = -Infinity; // the first chunk draws: a fast load still shows its line
  let width = 0;
  let sum = 0;
  const step = 16 << 20;
  for (let start = 0; start < bytes.length; start += step) {
    const end = Math.min(bytes.length, start + step);
    for (let i = start; i < end; i += PAGE_BYTES) sum = (sum + bytes[i]) | 0;
    if (show && performance.now() - lastDraw >= PROGRESS_INTERVAL_MS) {
      lastDraw = performance.now();
      const percent = Math.floor((end / bytes.length) * 100);
      const line = `dotllm: loading ${label} ${String(percent).padStart(3)}% ` +
        `(${Math.round(end / (1 << 20))}/${totalMib} MiB)`;
      width = Math.max(width, line.length);
      writeStderr(`\r${line}`);
    }
  }
  if (show && width > 0) writeStderr(`\r${" ".repeat(width)}\r`);
  return sum;
}

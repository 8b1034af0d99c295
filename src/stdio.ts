/**
 * Synchronous, runtime-neutral output on stdout and stderr, shared by the
 * library (the Hub's download notices and progress line) and the CLI:
 * `node:fs` `writeSync` on file descriptors 1 and 2 works the same in Deno
 * and Bun, never buffers behind our back, and reports a closed pipe as an
 * `EPIPE` error. It lives outside `src/cli/` because the library never
 * imports the CLI.
 *
 * @module
 */
import { writeSync } from "node:fs";
import { isatty } from "node:tty";

const encoder = new TextEncoder();

function writeAll(fd: number, data: string | Uint8Array): void {
  let bytes = typeof data === "string" ? encoder.encode(data) : data;
  while (bytes.length > 0) {
    const n = writeSync(fd, bytes);
    bytes = bytes.subarray(n);
  }
}

/** Writes to stdout; throws an error with `code === "EPIPE"` when the reader is gone. */
export function writeStdout(data: string | Uint8Array): void {
  writeAll(1, data);
}

/** Writes to stderr. */
export function writeStderr(data: string | Uint8Array): void {
  writeAll(2, data);
}

/** True for the error a write to a closed pipe raises. */
export function isBrokenPipe(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "EPIPE" || (error instanceof Error && error.name === "BrokenPipe");
}

/** True when file descriptor 2 is a terminal. */
export function stderrIsTerminal(): boolean {
  try {
    return isatty(2);
  } catch {
    return false;
  }
}

/**
 * The CLI's output functions: those of the shared `src/stdio.ts` (the
 * library's Hub code writes through the same ones).
 *
 * @module
 */
export { isBrokenPipe, writeStderr, writeStdout } from "../stdio.ts";

/** Finds the shared test data: `DOTLLM_TESTDATA`, default `../shared/testdata`. @module */
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

/** The test data folder. */
export const testdataDir: string = process.env.DOTLLM_TESTDATA ??
  fileURLToPath(new URL("../../shared/testdata", import.meta.url));

/** A path inside the test data folder. */
export function testdata(...parts: string[]): string {
  return join(testdataDir, ...parts);
}

/** The repository root. */
export const repoRoot: string = fileURLToPath(new URL("../", import.meta.url));

/**
 * The library never imports the CLI: no module under `src/` outside
 * `src/cli/` (nor `mod.ts`) names a path into `src/cli/` in an `import`,
 * `export … from` or dynamic `import()`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { repoRoot } from "./_testdata.ts";

/** Every `.ts` file under `dir`, recursively. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

/** The module specifiers of `source`: static imports and re-exports, and `import("…")`. */
function specifiers(source: string): string[] {
  const out: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) out.push(m[1]);
  return out;
}

const cliDir = resolve(repoRoot, "src", "cli");

Deno.test("the library (src/ outside src/cli/, and mod.ts) imports nothing from src/cli/", () => {
  const files = [
    ...tsFiles(join(repoRoot, "src")).filter((f) => !resolve(f).startsWith(cliDir + "/")),
    join(repoRoot, "mod.ts"),
  ];
  assert.ok(files.length > 50, `only ${files.length} library files found`);
  const offenders: string[] = [];
  for (const file of files) {
    for (const spec of specifiers(readFileSync(file, "utf8"))) {
      if (!spec.startsWith(".")) continue;
      const target = resolve(dirname(file), spec);
      if (target === cliDir || target.startsWith(cliDir + "/")) {
        offenders.push(`${relative(repoRoot, file)} imports ${spec}`);
      }
    }
  }
  assert.deepEqual(offenders, []);
});

Deno.test("the import scan sees a static, a type-only and a dynamic import", () => {
  const source = 'import { a } from "../cli/io.ts";\nimport type {\n  B,\n} from "./x.ts";\n' +
    'export * from "../cli/y.ts";\nconst m = await import("../cli/z.ts");\n';
  assert.deepEqual(specifiers(source).sort(), [
    "../cli/io.ts",
    "../cli/y.ts",
    "../cli/z.ts",
    "./x.ts",
  ]);
});

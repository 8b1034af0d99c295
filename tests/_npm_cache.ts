/**
 * Tests that run Deno with an empty `DENO_DIR` (the package loaded over
 * http, `deno publish` offline) get the npm packages deno.json imports copied
 * from this machine's Deno cache first, so they stay offline. @module
 */
import { cpSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./_testdata.ts";

/** Copies every `npm:` import of deno.json from the default Deno cache into `denoDir`. */
export function seedNpmCache(denoDir: string): void {
  const info = new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).outputSync();
  const npmCache: string = JSON.parse(new TextDecoder().decode(info.stdout)).npmCache;
  const imports: Record<string, string> =
    JSON.parse(readFileSync(join(repoRoot, "deno.json"), "utf8")).imports;
  for (const spec of Object.values(imports)) {
    const m = /^npm:(@?[^@]+)@/.exec(spec);
    if (m === null) continue;
    const from = join(npmCache, "registry.npmjs.org", m[1]);
    if (!existsSync(from)) continue; // not needed by the code under test (mitata: benchmarks)
    cpSync(from, join(denoDir, "npm", "registry.npmjs.org", m[1]), { recursive: true });
  }
}

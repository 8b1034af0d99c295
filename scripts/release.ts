/**
 * Builds every shipped library (`zig build release`) and writes
 * `zig-out/release/manifest.json` with each file's size and sha256, which a
 * package loaded over http(s) checks its download against.
 *
 * @module
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import process from "node:process";
import { sha256Hex } from "../src/native/embedded.ts";
import type { ReleaseManifest } from "../src/native/remote.ts";

const platform = process.argv[2];
const zig = await new Deno.Command("zig", {
  args: ["build", "release", ...(platform ? [`-Dplatform=${platform}`] : [])],
  stdout: "inherit",
  stderr: "inherit",
}).output();
if (zig.code !== 0) process.exit(1);

const dir = "zig-out/release";
const manifest: ReleaseManifest = {};
for (const file of readdirSync(dir).sort()) {
  if (!/\.(so|dylib|dll)$/.test(file)) continue;
  const bytes = readFileSync(`${dir}/${file}`);
  manifest[file] = { sha256: sha256Hex(bytes), size_bytes: bytes.length };
}
writeFileSync(`${dir}/manifest.json`, JSON.stringify(manifest, null, 2) + "\n");
console.error(`dotllm: ${Object.keys(manifest).length} libraries in ${dir}/manifest.json`);

/**
 * The release libraries in `zig-out/release/` (what `deno publish` ships):
 * each is a shared library of the OS and CPU its name says (ELF, Mach-O or PE
 * header), exports every symbol of `src/native/symbols.ts`, and matches the
 * size and sha256 in `manifest.json`, hashed here by WebCrypto, not by the
 * `sha256Hex` that wrote the manifest and that `remote.ts` checks downloads
 * with (so a wrong digest there cannot agree with itself). This platform's
 * pair is rebuilt first;
 * the cross-compiled ones are checked as found (`deno task release` builds
 * them all).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { platformName, releaseFileName, symbols } from "../src/native/mod.ts";
import { buildRelease } from "./_ship.ts";
import { repoRoot } from "./_testdata.ts";

/** `<format>-<cpu>` read from a shared library's header. */
function binaryKind(bytes: Uint8Array): string {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, false) === 0x7f454c46) {
    const type = view.getUint16(16, true); // ET_DYN = 3
    const machine = view.getUint16(18, true);
    const cpu = machine === 62 ? "x86_64" : machine === 183 ? "aarch64" : `machine ${machine}`;
    return `${type === 3 ? "elf" : `elf type ${type}`}-${cpu}`;
  }
  if (view.getUint32(0, true) === 0xfeedfacf) {
    const cpuType = view.getUint32(4, true);
    const fileType = view.getUint32(12, true); // MH_DYLIB = 6
    const cpu = cpuType === 0x01000007 ? "x86_64" : cpuType === 0x0100000c ? "aarch64" : "?";
    return `${fileType === 6 ? "macho" : `macho type ${fileType}`}-${cpu}`;
  }
  if (view.getUint16(0, false) === 0x4d5a) {
    const pe = view.getUint32(0x3c, true);
    assert.equal(view.getUint32(pe, false), 0x50450000, "PE signature");
    const machine = view.getUint16(pe + 4, true);
    const dll = (view.getUint16(pe + 22, true) & 0x2000) !== 0; // IMAGE_FILE_DLL
    return `${dll ? "pe" : "pe exe"}-${machine === 0x8664 ? "x86_64" : `machine ${machine}`}`;
  }
  return "unknown";
}

const expectedKind: Record<string, string> = { linux: "elf", macos: "macho", windows: "pe" };

Deno.test("release libraries: right OS and CPU, every symbol exported, manifest matches", async () => {
  await buildRelease(platformName());
  const dir = join(repoRoot, "zig-out", "release");
  const manifest: Record<string, { sha256: string; size_bytes: number }> = JSON.parse(
    readFileSync(join(dir, "manifest.json"), "utf8"),
  );
  const files = readdirSync(dir).filter((f) => f !== "manifest.json").sort();
  assert.deepEqual(Object.keys(manifest).sort(), files, "the manifest lists every library");
  assert.ok(files.includes(releaseFileName(platformName())));
  const names = Object.keys(symbols);
  for (const file of files) {
    const match =
      /^(?:lib)?dotllm-(linux|macos|windows)-(x86_64|aarch64)(-avx512)?\.(so|dylib|dll)$/
        .exec(file);
    assert.ok(match, `unexpected file ${file}`);
    const bytes = readFileSync(join(dir, file));
    assert.equal(binaryKind(bytes), `${expectedKind[match[1]]}-${match[2]}`, file);
    // Export names survive stripping (dynamic symbol / export tables), NUL-terminated.
    const text = new TextDecoder("latin1").decode(bytes);
    const missing = names.filter((n) => !text.includes(`${n}\0`));
    assert.deepEqual(missing, [], `${file} lacks exports: stale? run \`deno task release\``);
    assert.equal(manifest[file].size_bytes, statSync(join(dir, file)).size, file);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    assert.equal(manifest[file].sha256, hex, file);
  }
});

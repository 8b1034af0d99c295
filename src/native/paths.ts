/** Where native libraries live: file names per OS and the per-user cache folder. @module */
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";

/** The library's file name on an operating system (`process.platform`). */
export function libraryFileName(platform: string = process.platform): string {
  if (platform === "darwin") return "libdotllm.dylib";
  if (platform === "win32") return "dotllm.dll";
  return "libdotllm.so";
}

/** dotllm's per-user cache folder: `$XDG_CACHE_HOME/dotllm` or `~/.cache/dotllm`. */
export function cacheDir(): string {
  const env = process.env;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, "dotllm");
  if (process.platform === "win32" && env.LOCALAPPDATA) return join(env.LOCALAPPDATA, "dotllm");
  return join(homedir(), ".cache", "dotllm");
}

/** `<os>-<arch>` of this process, as release libraries are named (`linux-x86_64`, ...). */
export function platformName(
  platform: string = process.platform,
  arch: string = process.arch,
): string {
  const os = platform === "darwin" ? "macos" : platform === "win32" ? "windows" : platform;
  const cpu = arch === "x64" ? "x86_64" : arch === "arm64" ? "aarch64" : arch;
  return `${os}-${cpu}`;
}

/** The file name of a release library, e.g. `libdotllm-linux-x86_64-avx512.so`. */
export function releaseFileName(name: string, platform: string = process.platform): string {
  if (platform === "darwin") return `libdotllm-${name}.dylib`;
  if (platform === "win32") return `dotllm-${name}.dll`;
  return `libdotllm-${name}.so`;
}

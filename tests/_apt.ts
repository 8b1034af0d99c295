/**
 * Debian programs the tests drive (Chromium, nginx): the installed binary's
 * path, or `apt-get update` and `apt-get install -y --no-install-recommends`
 * of its package first when none is installed (as on a fresh CI machine).
 *
 * @module
 */
import { existsSync } from "node:fs";

/** The first of `paths` that exists, after installing `pkg` with apt-get when none does. */
export async function ensureDebianTool(paths: string[], pkg: string): Promise<string> {
  const find = () => paths.find((p) => existsSync(p));
  let path = find();
  if (path !== undefined) return path;
  const env = { DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["update"], ["install", "-y", "--no-install-recommends", pkg]]) {
    const out = await new Deno.Command("apt-get", { args, env, stdout: "null", stderr: "piped" })
      .output();
    if (!out.success) {
      throw new Error(`apt-get ${args[0]} failed: ${new TextDecoder().decode(out.stderr)}`);
    }
  }
  path = find();
  if (path === undefined) throw new Error(`${paths[0]} is missing after apt-get install ${pkg}`);
  return path;
}

/**
 * An exclusive lock on a file, held while one process downloads a blob, so
 * two pulls of the same file never write it at once. Under Deno it is an
 * `flock` on huggingface_hub's own lock path (the kernel releases it when the
 * process dies, and Python's `filelock` honours it); under Bun, which has no
 * file locks, a `<path>.pid` file created exclusively, taken over when the
 * process that wrote it is gone.
 *
 * @module
 */
import process from "node:process";
import * as fs from "node:fs";
import { dirname } from "node:path";

/** How often a waiter re-checks a Bun pid lock (a reason: cheap, and quick enough). */
const POLL_MS = 100;

/** Runs `work` while holding the lock at `path`; `onWait` is called once if another holds it. */
export async function withFileLock<T>(
  path: string,
  work: () => Promise<T>,
  onWait?: () => void,
): Promise<T> {
  fs.mkdirSync(dirname(path), { recursive: true });
  const deno = (globalThis as { Deno?: typeof Deno }).Deno;
  if (deno !== undefined && typeof deno.open === "function") {
    const file = await deno.open(path, { create: true, write: true });
    try {
      const locked = file.lock(true);
      if (onWait !== undefined) {
        // Give it 50 ms before telling the user why we wait.
        let timer: ReturnType<typeof setTimeout> | undefined;
        const quick = await Promise.race([
          locked.then(() => true),
          new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 50))),
        ]);
        clearTimeout(timer);
        if (!quick) onWait();
      }
      await locked;
      try {
        return await work();
      } finally {
        await file.unlock();
      }
    } finally {
      file.close();
    }
  }
  return await withPidLock(path + ".pid", work, onWait);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

async function withPidLock<T>(path: string, work: () => Promise<T>, onWait?: () => void) {
  let told = false;
  while (true) {
    try {
      const fd = fs.openSync(path, "wx");
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== "EEXIST") throw error;
      let pid = NaN;
      try {
        pid = Number(fs.readFileSync(path, "utf8"));
      } catch {
        continue; // removed meanwhile
      }
      if (Number.isInteger(pid) && pid > 0 && !alive(pid)) {
        fs.rmSync(path, { force: true });
        continue;
      }
      if (!told) onWait?.();
      told = true;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }
  try {
    return await work();
  } finally {
    fs.rmSync(path, { force: true });
  }
}

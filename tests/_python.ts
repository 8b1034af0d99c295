/**
 * Python packages for tests that drive dotllm as a Python program would
 * (`huggingface_hub`, `openai`, `jsonschema`): installed once per machine
 * with `pip install --target` into the ignored `models/.py/NAME/`, then run
 * with that folder on `PYTHONPATH`.
 *
 * @module
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./_testdata.ts";

/** The interpreter on PATH (`python3`, else `python`). */
export async function python(): Promise<string> {
  for (const name of ["python3", "python"]) {
    try {
      const out = await new Deno.Command(name, {
        args: ["--version"],
        stdout: "null",
        stderr: "null",
      })
        .output();
      if (out.success) return name;
    } catch {
      // not installed
    }
  }
  throw new Error("python3 is needed for this test (apt-get install python3-pip)");
}

/** A folder of pinned packages: `packages` are pip requirements (`openai==2.30.0`). */
export interface PythonEnv {
  py: string;
  path: string;
}

/** Installs `packages` into `models/.py/NAME` once (atomically); returns the interpreter and the folder. */
export async function pythonPackages(name: string, packages: string[]): Promise<PythonEnv> {
  const py = await python();
  const dir = join(repoRoot, "models", ".py", name);
  if (!fs.existsSync(join(dir, ".complete"))) {
    const temporary = `${dir}.tmp-${Deno.pid}`;
    fs.rmSync(temporary, { recursive: true, force: true });
    const out = await new Deno.Command(py, {
      args: [
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--target",
        temporary,
        ...packages,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(
        `pip install ${packages.join(" ")} failed:\n${new TextDecoder().decode(out.stderr)}`,
      );
    }
    fs.writeFileSync(join(temporary, ".complete"), packages.join("\n") + "\n");
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(temporary, dir);
  }
  return { py, path: dir };
}

/** Runs `code` with the packages of `env`; resolves to stdout, throws with stderr on failure. */
export async function runPython(
  env: PythonEnv,
  code: string,
  vars: Record<string, string> = {},
): Promise<string> {
  const out = await new Deno.Command(env.py, {
    args: ["-c", code],
    env: { ...vars, PYTHONPATH: env.path },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`python failed:\n${stderr}`);
  return new TextDecoder().decode(out.stdout);
}

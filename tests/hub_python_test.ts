/**
 * The cache is shared with the Python `huggingface_hub` (installed from PyPI
 * into the ignored `models/.py/`): its `scan_cache_dir()` finds what dotllm
 * pulled at the same paths, and dotllm finds what its `hf_hub_download()`
 * fetched from the same (fake) Hub without downloading it again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { fakeCommit, sha256, startFakeHub } from "./_fake_hub.ts";
import { pythonPackages, runPython as run } from "./_python.ts";
import { hubEnv, runCli, storiesBytes, tempHome } from "./_hub.ts";

/** The release tested against (a reason for a pin: the test must not drift with PyPI). */
const HF_HUB_VERSION = "2.4.0";

async function runPython(code: string, env: Record<string, string>): Promise<string> {
  const python = await pythonPackages(`huggingface_hub-${HF_HUB_VERSION}`, [
    `huggingface_hub==${HF_HUB_VERSION}`,
  ]);
  return await run(python, code, {
    ...env,
    HF_HUB_DISABLE_TELEMETRY: "1",
    HF_HUB_DISABLE_XET: "1",
  });
}

const SCAN = `
import json
from huggingface_hub import scan_cache_dir
info = scan_cache_dir()
print(json.dumps({
  "warnings": [str(w) for w in info.warnings],
  "repos": [{
    "repo_id": r.repo_id, "repo_type": r.repo_type,
    "revisions": [{
      "commit_hash": v.commit_hash, "refs": sorted(v.refs),
      "files": sorted([{"file_name": f.file_name, "file_path": str(f.file_path),
                        "blob_path": str(f.blob_path), "size_on_disk": f.size_on_disk}
                       for f in v.files], key=lambda f: f["file_name"]),
    } for v in r.revisions],
  } for r in info.repos],
}))
`;

const STORIES = storiesBytes();
const REPO = {
  "org/stories": {
    files: {
      "README.md": { bytes: new TextEncoder().encode("# stories\n") },
      "stories-Q8_0.gguf": { bytes: STORIES },
    },
  },
};

Deno.test("huggingface_hub's scan_cache_dir() finds what dotllm pulled, at the same paths", async () => {
  await using hub = startFakeHub(REPO);
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const pulled = await runCli(["pull", "org/stories:Q8_0"], env);
  assert.equal(pulled.code, 0, pulled.stderr);
  const scan = JSON.parse(await runPython(SCAN, env));
  const repoDir = join(home.path, "hub", "models--org--stories");
  assert.deepEqual(scan, {
    warnings: [],
    repos: [{
      repo_id: "org/stories",
      repo_type: "model",
      revisions: [{
        commit_hash: fakeCommit("org/stories"),
        refs: ["main"],
        files: [{
          file_name: "stories-Q8_0.gguf",
          file_path: pulled.stdout.trim(),
          blob_path: join(repoDir, "blobs", sha256(STORIES)),
          size_on_disk: STORIES.length,
        }],
      }],
    }],
  });
});

Deno.test("dotllm finds what huggingface_hub's hf_hub_download() fetched, without downloading it again", async () => {
  await using hub = startFakeHub(REPO);
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const path = (await runPython(
    `from huggingface_hub import hf_hub_download\nprint(hf_hub_download("org/stories", "stories-Q8_0.gguf"))`,
    env,
  )).trim();
  assert.equal(hub.cdnBytes, STORIES.length);
  const offline = await runCli(["pull", "org/stories:Q8_0"], { ...env, HF_HUB_OFFLINE: "1" });
  assert.equal(offline.code, 0, offline.stderr);
  assert.equal(offline.stdout.trim(), path);
  const online = await runCli(["pull", "org/stories:Q8_0", "--json"], env);
  assert.equal(online.code, 0, online.stderr);
  assert.equal(JSON.parse(online.stdout).model_path, path);
  assert.equal(hub.cdnBytes, STORIES.length, "reused, not downloaded again");
  const listed = JSON.parse((await runCli(["list", "--json"], env)).stdout);
  assert.deepEqual(listed.map((m: { name: string; path: string }) => [m.name, m.path]), [
    ["org/stories:Q8_0", path],
  ]);
});

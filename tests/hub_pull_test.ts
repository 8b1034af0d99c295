/**
 * `dotllm pull` against a fake Hub on 127.0.0.1 (tests/_fake_hub.ts), in a
 * fresh HF cache each: the cache layout, quant choice, resume after a kill,
 * a corrupted download, 401/403/404, offline mode, split models, concurrent
 * pulls, list and rm.
 *
 * @module
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { join } from "node:path";
import { fakeCommit, gitOid, sha256, startFakeHub } from "./_fake_hub.ts";
import { hubEnv, runCli, spawnCli, storiesBytes, tempHome } from "./_hub.ts";

const STORIES = storiesBytes();
const README = new TextEncoder().encode("---\nlicense: mit\n---\n# stories\n");
const COMMIT = fakeCommit("org/stories");

function storiesRepo() {
  return {
    "org/stories": {
      files: {
        ".gitattributes": { bytes: new TextEncoder().encode("*.gguf filter=lfs\n") },
        "README.md": { bytes: README },
        "stories-Q8_0.gguf": { bytes: STORIES },
        "stories-Q4_K_M.gguf": { bytes: STORIES.slice(0, 300_000) },
        "mmproj-stories-f16.gguf": { bytes: STORIES.slice(0, 1000) },
      },
    },
  };
}

function repoDir(home: string, repo = "org/stories"): string {
  return join(home, "hub", "models--" + repo.replace("/", "--"));
}

Deno.test("pull ORG/REPO:QUANT stores the file in the HF cache layout and prints its path", async () => {
  await using hub = startFakeHub(storiesRepo());
  hub.control.pageSize = 2; // the listing comes in pages linked by `Link: rel="next"`
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const result = await runCli(["pull", "org/stories:q8_0"], env);
  assert.equal(result.stderr, ""); // stderr is not a terminal: no progress line
  assert.equal(result.code, 0);
  const dir = repoDir(home.path);
  const pointer = join(dir, "snapshots", COMMIT, "stories-Q8_0.gguf");
  assert.equal(result.stdout, pointer + "\n");
  assert.equal(fs.readlinkSync(pointer), join("..", "..", "blobs", sha256(STORIES)));
  assert.deepEqual(new Uint8Array(fs.readFileSync(pointer)), STORIES);
  assert.equal(fs.readFileSync(join(dir, "refs", "main"), "utf8"), COMMIT);
  assert.deepEqual(fs.readdirSync(join(dir, "blobs")), [sha256(STORIES)]);
  assert.equal(hub.cdnBytes, STORIES.length);
  assert.ok(hub.requests.some((r) => r.includes("cursor=")), "the second page was fetched");

  // Pulled again: nothing is downloaded; the same path.
  const again = await runCli(["pull", "org/stories:Q8_0", "--json"], env);
  assert.equal(again.code, 0, again.stderr);
  const json = JSON.parse(again.stdout);
  assert.equal(json.model_path, pointer);
  assert.equal(json.commit, COMMIT);
  assert.equal(json.files[0].transferred_bytes, 0);
  assert.equal(json.files[0].etag, sha256(STORIES));
  assert.equal(hub.cdnBytes, STORIES.length);
});

Deno.test("pull picks the default quant, takes hf:, FILE and URL forms, and fetches small non-LFS files", async () => {
  await using hub = startFakeHub(storiesRepo());
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const snapshot = join(repoDir(home.path), "snapshots", COMMIT);
  const cases: [string, string][] = [
    ["org/stories", "stories-Q4_K_M.gguf"], // default Q4_K_M
    ["hf:org/stories:Q8_0", "stories-Q8_0.gguf"],
    ["org/stories/mmproj-stories-f16.gguf", "mmproj-stories-f16.gguf"],
    [`${hub.url}/org/stories/resolve/main/README.md`, "README.md"], // git blob, sha1 checked
  ];
  for (const [ref, file] of cases) {
    const result = await runCli(["pull", ref], env);
    assert.equal(result.code, 0, `${ref}: ${result.stderr}`);
    assert.equal(result.stdout, join(snapshot, file) + "\n", ref);
  }
  assert.deepEqual(fs.readFileSync(join(snapshot, "README.md")), Buffer.from(README));
  assert.ok(fs.existsSync(join(repoDir(home.path), "blobs", gitOid(README))));

  const missing = await runCli(["pull", "org/stories:Q5_K_M"], env);
  assert.equal(missing.code, 1);
  assert.equal(
    missing.stderr,
    "dotllm: org/stories: no GGUF file for quant Q5_K_M in the repository (quants: Q8_0, Q4_K_M)\n",
  );
  const notRef = await runCli(["pull", "./model.gguf"], env);
  assert.equal(notRef.code, 2);
  assert.match(notRef.stderr, /is not a Hub reference/);
});

Deno.test("a pull killed halfway resumes with a Range request and transfers only the rest", async () => {
  await using hub = startFakeHub(storiesRepo());
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const blob = join(repoDir(home.path), "blobs", sha256(STORIES));
  hub.control.rateBytesPerSecond = 400_000; // ~3 s for the file: time to kill it halfway
  const child = spawnCli(["pull", "org/stories:Q8_0"], env);
  const deadline = Date.now() + 30_000;
  let partial = 0;
  while (Date.now() < deadline) {
    try {
      partial = fs.statSync(blob + ".incomplete").size;
    } catch {
      partial = 0;
    }
    if (partial >= STORIES.length * 0.3) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  child.kill("SIGKILL");
  const killed = await child.output();
  assert.notEqual(killed.code, 0);
  assert.ok(partial >= STORIES.length * 0.3, `only ${partial} bytes before the deadline`);
  assert.ok(!fs.existsSync(blob), "no blob in place after the kill");
  const kept = fs.statSync(blob + ".incomplete").size;
  assert.ok(kept > 0 && kept < STORIES.length, `kept ${kept}`);
  assert.ok(!fs.existsSync(join(repoDir(home.path), "snapshots", COMMIT, "stories-Q8_0.gguf")));

  hub.control.rateBytesPerSecond = 0;
  assert.deepEqual(hub.transfers.map((t) => t.range), [null]);
  const resumed = await runCli(["pull", "org/stories:Q8_0", "--json"], env);
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.deepEqual(hub.transfers.map((t) => t.range), [null, `bytes=${kept}-`]);
  const second = hub.transfers[1].bytes;
  assert.equal(second, STORIES.length - kept, "the second run fetched only the missing bytes");
  assert.ok(second <= STORIES.length * 0.7, "fewer bytes than a full download");
  const json = JSON.parse(resumed.stdout);
  assert.equal(json.files[0].resumed_bytes, kept);
  assert.equal(json.files[0].transferred_bytes, second);
  assert.deepEqual(new Uint8Array(fs.readFileSync(json.model_path)), STORIES);
  assert.ok(!fs.existsSync(blob + ".incomplete"));
});

Deno.test("a connection dropped midway is resumed in the same run, from where it stopped", async () => {
  await using hub = startFakeHub(storiesRepo());
  hub.control.dropCount = 2;
  hub.control.dropAfterBytes = 300_000;
  using home = tempHome();
  const result = await runCli(["pull", "org/stories:Q8_0", "--json"], hubEnv(home.path, hub.url));
  assert.equal(result.code, 0, result.stderr);
  const ranges = hub.transfers.map((t) => t.range);
  assert.equal(ranges.length, 3, JSON.stringify(hub.transfers));
  assert.equal(ranges[0], null);
  assert.match(ranges[1]!, /^bytes=\d+-$/);
  assert.match(ranges[2]!, /^bytes=\d+-$/);
  const total = hub.transfers.reduce((sum, t) => sum + t.bytes, 0);
  assert.ok(total < STORIES.length + 2 * 16384, `sent ${total} bytes in all`);
  const lines = result.stderr.trim().split("\n");
  assert.equal(lines.length, 2, result.stderr);
  for (const line of lines) {
    assert.match(
      line,
      /^dotllm: stories-Q8_0.gguf: download interrupted after \d+ of 1185376 bytes \(.*\): resuming$/,
    );
  }
  const json = JSON.parse(result.stdout);
  assert.deepEqual(new Uint8Array(fs.readFileSync(json.model_path)), STORIES);
  assert.equal(json.files[0].resumed_bytes, 0);

  // A connection that keeps dropping before any byte ends the run, keeping nothing wrong.
  using home2 = tempHome();
  hub.control.dropCount = 100;
  hub.control.dropAfterBytes = 0;
  const failed = await runCli(["pull", "org/stories:Q8_0"], hubEnv(home2.path, hub.url));
  assert.equal(failed.code, 1);
  assert.match(failed.stderr, /run the pull again to resume\n$/);
  assert.ok(!fs.existsSync(join(repoDir(home2.path), "blobs", sha256(STORIES))));
});

Deno.test("a corrupted download is refused, deleted and never moved into place", async () => {
  await using hub = startFakeHub(storiesRepo());
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  hub.control.corrupt = true;
  const result = await runCli(["pull", "org/stories:Q8_0"], env);
  assert.equal(result.code, 1);
  assert.match(
    result.stderr,
    new RegExp(
      `^dotllm: stories-Q8_0.gguf: checksum mismatch \\(expected ${
        sha256(STORIES)
      }, got [0-9a-f]{64}\\): the download was corrupted and has been deleted\\n$`,
    ),
  );
  assert.equal(result.stdout, "");
  const blobs = join(repoDir(home.path), "blobs");
  assert.deepEqual(fs.readdirSync(blobs), [], "neither the blob nor the .incomplete file is left");
  assert.ok(!fs.existsSync(join(repoDir(home.path), "snapshots", COMMIT, "stories-Q8_0.gguf")));

  hub.control.corrupt = false;
  const retry = await runCli(["pull", "org/stories:Q8_0"], env);
  assert.equal(retry.code, 0, retry.stderr);
});

Deno.test("401, 403 and 404 give one clear line naming what to do", async () => {
  await using hub = startFakeHub({
    ...storiesRepo(),
    "org/private": { token: "hf_secret", files: { "p-Q8_0.gguf": { bytes: STORIES } } },
    "org/gated": { token: "hf_granted", gated: true, files: { "g-Q8_0.gguf": { bytes: STORIES } } },
  });
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const cases: [string[], Record<string, string>, RegExp][] = [
    [
      ["pull", "org/nothing"],
      {},
      /^dotllm: org\/nothing: 401 Unauthorized: the repository does not exist, or it is private or gated; if it is private or gated, set HF_TOKEN or give an access token \(the Hub says: Repository not found\) \[the token: HF_TOKEN or --token\]\n$/,
    ],
    [
      ["pull", "org/private:Q8_0"],
      {},
      /^dotllm: org\/private: 401 Unauthorized: .*set HF_TOKEN or give an access token.*\[the token: HF_TOKEN or --token\]\n$/,
    ],
    [
      ["pull", "org/private:Q8_0", "--token", "hf_wrong"],
      {},
      /^dotllm: org\/private: 401 Unauthorized: .*the access token given was not accepted/,
    ],
    [
      ["pull", "org/gated/g-Q8_0.gguf"],
      { HF_TOKEN: "hf_other" },
      /^dotllm: org\/gated: 403 Forbidden: the repository is gated: accept its terms on its Hub page/,
    ],
    [
      ["pull", "org/stories/nope-Q4_0.gguf"],
      {},
      /^dotllm: org\/stories\/nope-Q4_0.gguf: 404 Not Found: no such file in org\/stories \(the Hub says: Entry not found\)\n$/,
    ],
    [
      ["pull", `${hub.url}/org/stories/resolve/v9/stories-Q8_0.gguf`],
      {},
      /^dotllm: org\/stories\/stories-Q8_0.gguf: 404 Not Found: no such revision in org\/stories/,
    ],
  ];
  for (const [args, extra, pattern] of cases) {
    const result = await runCli(args, { ...env, ...extra });
    assert.equal(result.code, 1, args.join(" "));
    assert.match(result.stderr, pattern, args.join(" "));
    assert.equal(result.stderr.split("\n").length, 2, "one line");
  }
  // The right token works, from --token or HF_TOKEN.
  const ok = await runCli(["pull", "org/private:Q8_0", "--token", "hf_secret"], env);
  assert.equal(ok.code, 0, ok.stderr);
  const gated = await runCli(["pull", "org/gated:Q8_0"], { ...env, HF_TOKEN: "hf_granted" });
  assert.equal(gated.code, 0, gated.stderr);
});

Deno.test("HF_HUB_OFFLINE=1 answers from the cache only, and says so when it cannot", async () => {
  using home = tempHome();
  let path: string;
  {
    await using hub = startFakeHub(storiesRepo());
    const result = await runCli(["pull", "org/stories"], hubEnv(home.path, hub.url));
    assert.equal(result.code, 0, result.stderr);
    path = result.stdout.trim();
  }
  // The server is gone: offline mode still finds the model, by every form of its name.
  const env = hubEnv(home.path, "http://127.0.0.1:9", { HF_HUB_OFFLINE: "1" });
  for (const ref of ["org/stories", "org/stories:q4_k_m", "hf:org/stories/stories-Q4_K_M.gguf"]) {
    const result = await runCli(["pull", ref], env);
    assert.equal(result.code, 0, `${ref}: ${result.stderr}`);
    assert.equal(result.stdout.trim(), path);
  }
  const missing = await runCli(["pull", "org/stories:Q8_0"], env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^dotllm: org\/stories: no GGUF file for quant Q8_0 in the cache/);
  const other = await runCli(["pull", "org/other"], env);
  assert.equal(other.code, 1);
  assert.match(
    other.stderr,
    /^dotllm: org\/other is not in the cache \(.*\) and the Hub is offline\n$/,
  );

  // Online but the Hub unreachable: the cached copy is used, with a notice.
  const down = await runCli(["pull", "org/stories"], hubEnv(home.path, "http://127.0.0.1:9"));
  assert.equal(down.code, 0, down.stderr);
  assert.equal(down.stdout.trim(), path);
  assert.match(
    down.stderr,
    /^dotllm: cannot reach http:\/\/127\.0\.0\.1:9 .*: using the cached org\/stories\n$/,
  );
});

Deno.test("a split model's parts are all pulled, side by side in the snapshot", async () => {
  const half = Math.floor(STORIES.length / 2);
  await using hub = startFakeHub({
    "org/split": {
      files: {
        "m-Q8_0-00001-of-00002.gguf": { bytes: STORIES.slice(0, half) },
        "m-Q8_0-00002-of-00002.gguf": { bytes: STORIES.slice(half) },
        "m-Q4_0.gguf": { bytes: STORIES.slice(0, 100) },
      },
    },
  });
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const snapshot = join(repoDir(home.path, "org/split"), "snapshots", fakeCommit("org/split"));
  const result = await runCli(["pull", "org/split:Q8_0", "--json"], env);
  assert.equal(result.code, 0, result.stderr);
  const json = JSON.parse(result.stdout);
  assert.equal(json.model_path, join(snapshot, "m-Q8_0-00001-of-00002.gguf"));
  assert.deepEqual(json.files.map((f: { file: string }) => f.file), [
    "m-Q8_0-00001-of-00002.gguf",
    "m-Q8_0-00002-of-00002.gguf",
  ]);
  const joined = Buffer.concat([
    fs.readFileSync(join(snapshot, "m-Q8_0-00001-of-00002.gguf")),
    fs.readFileSync(join(snapshot, "m-Q8_0-00002-of-00002.gguf")),
  ]);
  assert.deepEqual(new Uint8Array(joined), STORIES);
  // Naming one part brings its sibling too.
  using home2 = tempHome();
  const byFile = await runCli(
    ["pull", "org/split/m-Q8_0-00002-of-00002.gguf", "--json"],
    hubEnv(home2.path, hub.url),
  );
  assert.equal(byFile.code, 0, byFile.stderr);
  assert.equal(JSON.parse(byFile.stdout).files.length, 2);
});

Deno.test("two concurrent pulls of one file both succeed with one download and one intact file", async () => {
  await using hub = startFakeHub(storiesRepo());
  hub.control.rateBytesPerSecond = 2_000_000; // long enough (~0.6 s) for the two to overlap
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const [a, b] = await Promise.all([
    runCli(["pull", "org/stories:Q8_0"], env),
    runCli(["pull", "org/stories:Q8_0"], env),
  ]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  assert.equal(a.stdout, b.stdout);
  assert.deepEqual(new Uint8Array(fs.readFileSync(a.stdout.trim())), STORIES);
  assert.deepEqual(fs.readdirSync(join(repoDir(home.path), "blobs")), [sha256(STORIES)]);
  assert.equal(hub.cdnBytes, STORIES.length, "the file was downloaded once");
});

Deno.test("list shows cached models (name, quant, size, path); rm removes them and their blobs", async () => {
  await using hub = startFakeHub(storiesRepo());
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const empty = await runCli(["list"], env);
  assert.equal(empty.code, 0, empty.stderr);
  assert.equal(empty.stdout, `no models in ${join(home.path, "hub")}\n`);
  for (const ref of ["org/stories:Q8_0", "org/stories:Q4_K_M"]) {
    assert.equal((await runCli(["pull", ref], env)).code, 0);
  }
  const snapshot = join(repoDir(home.path), "snapshots", COMMIT);
  const listed = await runCli(["list", "--json"], env);
  assert.equal(listed.code, 0, listed.stderr);
  const models = JSON.parse(listed.stdout);
  assert.deepEqual(
    models.map((m: { name: string; quant: string; size_bytes: number; path: string }) => [
      m.name,
      m.quant,
      m.size_bytes,
      m.path,
    ]),
    [
      ["org/stories:Q4_K_M", "Q4_K_M", 300_000, join(snapshot, "stories-Q4_K_M.gguf")],
      ["org/stories:Q8_0", "Q8_0", STORIES.length, join(snapshot, "stories-Q8_0.gguf")],
    ],
  );
  const table = await runCli(["list"], env);
  assert.match(
    table.stdout,
    /^NAME +QUANT +SIZE +PATH\norg\/stories:Q4_K_M +Q4_K_M +300\.0 KB +\//,
  );

  const rm = await runCli(["rm", "org/stories:q8_0"], env);
  assert.equal(rm.code, 0, rm.stderr);
  assert.equal(rm.stdout, `removed ${join(snapshot, "stories-Q8_0.gguf")}\n`);
  assert.deepEqual(fs.readdirSync(join(repoDir(home.path), "blobs")), [
    sha256(STORIES.slice(0, 300_000)),
  ]);
  const after = JSON.parse((await runCli(["list", "--json"], env)).stdout);
  assert.deepEqual(after.map((m: { name: string }) => m.name), ["org/stories:Q4_K_M"]);
  const again = await runCli(["rm", "org/stories:Q8_0"], env);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /^dotllm: org\/stories:Q8_0 is not in the cache/);
  const all = await runCli(["rm", "org/stories"], env);
  assert.equal(all.code, 0, all.stderr);
  assert.ok(!fs.existsSync(repoDir(home.path)));
});

Deno.test("inspect, tokenize and run take a Hub reference and pull it first", async () => {
  await using hub = startFakeHub(storiesRepo());
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  const inspect = await runCli(["inspect", "hf:org/stories:Q8_0", "--json"], env);
  assert.equal(inspect.code, 0, inspect.stderr);
  const summary = JSON.parse(inspect.stdout);
  assert.equal(summary.file, join(repoDir(home.path), "snapshots", COMMIT, "stories-Q8_0.gguf"));
  assert.equal(summary.architecture, "llama");
  const tokenize = await runCli(["tokenize", "org/stories:Q8_0", "-p", "Once upon a time"], env);
  assert.equal(tokenize.code, 0, tokenize.stderr);
  const direct = await runCli(["tokenize", summary.file, "-p", "Once upon a time"], env);
  assert.equal(tokenize.stdout, direct.stdout);
  const run = await runCli([
    "run",
    "org/stories:Q8_0",
    "-p",
    "Once upon a time",
    "-n",
    "8",
    "--temp",
    "0",
  ], env);
  const runDirect = await runCli([
    "run",
    summary.file,
    "-p",
    "Once upon a time",
    "-n",
    "8",
    "--temp",
    "0",
  ], env);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout, runDirect.stdout);
  assert.equal(hub.cdnBytes, STORIES.length, "pulled once, then found in the cache");
});

Deno.test("a broken or hostile Hub answer gives one line and writes nothing outside the cache", async () => {
  await using hub = startFakeHub({
    "org/evil": {
      files: {
        "../../../escaped-Q4_K_M.gguf": { bytes: STORIES.slice(0, 100) },
        "ok-Q8_0.gguf": { bytes: STORIES.slice(0, 200) },
      },
    },
    "org/notjson": { files: {}, treeBody: "<html>oops</html>" },
    "org/notarray": { files: {}, treeBody: '{"error": null}' },
  });
  using home = tempHome();
  const env = hubEnv(home.path, hub.url);
  // The escaping Q4_K_M entry is skipped: the default falls through to Q8_0.
  const evil = await runCli(["pull", "org/evil"], env);
  assert.equal(evil.code, 0, evil.stderr);
  assert.match(evil.stdout, /\/ok-Q8_0\.gguf\n$/);
  assert.ok(!fs.existsSync(join(home.path, "escaped-Q4_K_M.gguf")));
  assert.ok(!fs.existsSync(join(home.path, "hub", "escaped-Q4_K_M.gguf")));
  for (const repo of ["org/notjson", "org/notarray"]) {
    const result = await runCli(["pull", repo], env);
    assert.equal(result.code, 1, repo);
    assert.match(
      result.stderr,
      new RegExp(
        `^dotllm: ${repo}: unexpected file listing from http://127\\.0\\.0\\.1:\\d+ \\(.+\\)\n$`,
      ),
    );
  }
  const badUrl = await runCli(["pull", "hf:org"], env);
  assert.equal(badUrl.code, 1);
  assert.equal(
    badUrl.stderr,
    'dotllm: "hf:org": expected ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf\n',
  );
});

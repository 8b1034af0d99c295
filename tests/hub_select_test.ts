/** Hub references and llama.cpp's `-hf` file choice. @module */
import assert from "node:assert/strict";
import { parseHubRef } from "../src/hub/ref.ts";
import { findBestModel, pickModelFiles, splitInfo } from "../src/hub/select.ts";

Deno.test("hub refs: ORG/REPO[:QUANT], ORG/REPO/FILE, hf:, hf.co/ and resolve URLs", () => {
  assert.deepEqual(parseHubRef("bartowski/Qwen-GGUF:q4_k_m"), {
    repo: "bartowski/Qwen-GGUF",
    revision: "main",
    quant: "Q4_K_M",
    text: "bartowski/Qwen-GGUF:q4_k_m",
  });
  assert.equal(parseHubRef("org/repo")?.quant, undefined);
  assert.equal(parseHubRef("hf:org/repo:Q8_0")?.quant, "Q8_0");
  assert.equal(parseHubRef("hf.co/org/repo:Q8_0")?.repo, "org/repo");
  assert.deepEqual(parseHubRef("org/repo/sub/m-Q8_0.gguf"), {
    repo: "org/repo",
    revision: "main",
    file: "sub/m-Q8_0.gguf",
    text: "org/repo/sub/m-Q8_0.gguf",
  });
  const url = parseHubRef("http://127.0.0.1:8080/org/repo/resolve/v1.0/m%20x.gguf?download=true");
  assert.deepEqual(url && { ...url, text: "" }, {
    repo: "org/repo",
    revision: "v1.0",
    file: "m x.gguf",
    endpoint: "http://127.0.0.1:8080",
    text: "",
  });
  assert.equal(parseHubRef("https://huggingface.co/org/repo/blob/main/a.gguf")?.file, "a.gguf");
});

Deno.test("hub refs: paths stay paths, malformed refs are refused with one line", () => {
  for (
    const path of ["model.gguf", "./org/repo", "/abs/org/repo.gguf", "models/x.gguf", "a/b/c.txt"]
  ) {
    assert.equal(parseHubRef(path), undefined, path);
  }
  assert.throws(() => parseHubRef("hf:org"), /expected ORG\/REPO\[:QUANT\]/);
  assert.throws(() => parseHubRef("hf:org/re po"), /not a valid Hugging Face repository name/);
  assert.throws(() => parseHubRef("hf:org/repo/../../etc/passwd"), /not a valid file path/);
  assert.throws(() => parseHubRef("hf:org/repo:Q4 K"), /not a quant tag/);
  assert.throws(() => parseHubRef("https://huggingface.co/org/repo"), /expected a Hub file URL/);
  assert.throws(
    () => parseHubRef("https://h/org/repo/resolve/main/a/..%2F..%2Fx"),
    /not a valid file path/,
  );
});

Deno.test("split names parse as llama.cpp's get_gguf_split_info", () => {
  assert.deepEqual(splitInfo("Qwen3-8B-Q4_K_M-00002-of-00003.gguf"), {
    prefix: "Qwen3-8B-Q4_K_M",
    tag: "Q4_K_M",
    index: 2,
    count: 3,
  });
  assert.deepEqual(splitInfo("sub/model.f16.gguf"), {
    prefix: "sub/model.f16",
    tag: "F16",
    index: 1,
    count: 1,
  });
  assert.equal(splitInfo("README.md"), undefined);
});

// The listing of a real repository (bartowski/Qwen2.5-0.5B-Instruct-GGUF-like), in Hub order.
const LISTING = [
  ".gitattributes",
  "README.md",
  "Qwen2.5-0.5B-Instruct-IQ4_XS.gguf",
  "Qwen2.5-0.5B-Instruct-Q3_K_L.gguf",
  "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",
  "Qwen2.5-0.5B-Instruct-Q4_K_S.gguf",
  "Qwen2.5-0.5B-Instruct-Q8_0.gguf",
  "Qwen2.5-0.5B-Instruct-f16.gguf",
  "Qwen2.5-0.5B-Instruct.imatrix.gguf",
  "mmproj-Qwen2.5-0.5B-Instruct-f16.gguf",
];

Deno.test("quant choice follows llama.cpp -hf: tag case-insensitive, default Q4_K_M, then Q8_0, then the first GGUF", () => {
  assert.equal(findBestModel(LISTING), "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf");
  assert.equal(findBestModel(LISTING, "q4_k_s"), "Qwen2.5-0.5B-Instruct-Q4_K_S.gguf");
  assert.equal(findBestModel(LISTING, "F16"), "Qwen2.5-0.5B-Instruct-f16.gguf"); // not the mmproj
  assert.equal(findBestModel(LISTING, "Q5_K_M"), undefined);
  const noQ4 = LISTING.filter((p) => !p.includes("Q4_K_M"));
  assert.equal(findBestModel(noQ4), "Qwen2.5-0.5B-Instruct-Q8_0.gguf");
  const neither = noQ4.filter((p) => !p.includes("Q8_0"));
  assert.equal(findBestModel(neither), "Qwen2.5-0.5B-Instruct-IQ4_XS.gguf");
  assert.equal(findBestModel(["mmproj-f16.gguf", "x.imatrix.gguf", "README.md"]), undefined);
  // "Q4_K_M" must be followed by "." or "-": Q4_K_M_L is another tag
  assert.equal(findBestModel(["m-Q4_K_M_L.gguf"], "Q4_K_M"), undefined);
});

Deno.test("a split model is chosen by its first part and fetched whole, in order", () => {
  const files = [
    "big/m-Q8_0-00002-of-00002.gguf",
    "big/m-Q4_K_M-00002-of-00003.gguf",
    "big/m-Q4_K_M-00003-of-00003.gguf",
    "big/m-Q4_K_M-00001-of-00003.gguf",
    "big/m-Q8_0-00001-of-00002.gguf",
  ];
  assert.deepEqual(pickModelFiles(files), [
    "big/m-Q4_K_M-00001-of-00003.gguf",
    "big/m-Q4_K_M-00002-of-00003.gguf",
    "big/m-Q4_K_M-00003-of-00003.gguf",
  ]);
  assert.deepEqual(pickModelFiles(files, "q8_0"), [
    "big/m-Q8_0-00001-of-00002.gguf",
    "big/m-Q8_0-00002-of-00002.gguf",
  ]);
});

/**
 * `dotllm chat` and `dotllm run --chat` from the outside: scripted
 * conversations on stdin, the one-line errors, and (in a real terminal, tmux)
 * two turns, a multi-line message, Ctrl-C in the middle of a reply, /clear,
 * Ctrl-D, with the prefilled token counts of each turn.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { makeModel } from "../src/gguf/make_model.ts";
import { cli, DENO_ARGS, nextTurnTokens, notes, tinyChatModel } from "./_chat.ts";
import { repoRoot, testdata } from "./_testdata.ts";

Deno.test("chat: without a terminal, each line is a turn, each reply is followed by a blank line", async () => {
  const model = tinyChatModel();
  const n = 6;
  const out = await cli(
    ["chat", model, "-n", String(n), "--temp", "1", "-s", "3", "-c", "512", "-t", "1"],
    "Hello there\nTell me more\n/clear\nHello there\n",
  );
  assert.equal(out.code, 0, out.stderr);
  const replies = out.stdout.split("\n\n");
  assert.equal(replies.at(-1), "", JSON.stringify(out.stdout));
  assert.equal(replies.length, 4, JSON.stringify(out.stdout)); // three replies
  const [first, second, third] = notes(out.stderr);
  assert.ok(third !== undefined, out.stderr);
  assert.match(out.stderr, /\(conversation cleared\)/);
  assert.equal(first.cached, 0);
  assert.equal(first.generated, n);
  // Turn 2 prefills only its own tokens: the reply's last token (sampled, never
  // run through the model) and what the template adds for the new message.
  // The cache keeps them from a multiple of 8 on (the driver's batch-invariant order).
  const common = first.prefilled + n - 1;
  assert.equal(second.cached, common - common % 8);
  assert.equal(second.prefilled, 1 + nextTurnTokens(model, "Tell me more") + common % 8);
  // After /clear the default system prompt's tokens are still in the cache.
  assert.ok(third.cached > 10 && third.cached < first.prefilled, JSON.stringify(third));
});

Deno.test("chat: the oldest turns are dropped when the context fills, the system message kept", async () => {
  const model = tinyChatModel();
  const long = "word ".repeat(60).trim();
  const out = await cli(
    ["chat", model, "-sys", "Be brief.", "-n", "16", "--temp", "0", "-c", "256", "-t", "1", "-q"],
    `${long}\n${long}\n${long}\n`,
  );
  assert.equal(out.code, 0, out.stderr);
  assert.match(
    out.stderr,
    /the context of 256 tokens is full: dropped the 2 oldest messages \(the system message is kept\)/,
  );
  assert.doesNotMatch(out.stderr, /\[prefill/); // -q hides the notes
});

Deno.test("chat and run --chat: one clear line and exit 1 for template trouble", async () => {
  const tiny = tinyChatModel();
  const stories = testdata("models/stories260K.gguf");
  const bad = await Deno.makeTempFile({ suffix: ".jinja" });
  const broken = await Deno.makeTempFile({ suffix: ".jinja" });
  try {
    await Deno.writeTextFile(bad, "{{ raise_exception('roles must alternate') }}");
    await Deno.writeTextFile(broken, "{% for m in %}\n{{ m }}\n");
    const cases: [string[], RegExp][] = [
      [
        ["run", stories, "--chat", "-p", "Hi"],
        /has no chat template: give --chat-template FILE or one of chatml, llama3, gemma, phi3, mistral$/,
      ],
      [
        ["chat", stories],
        /has no chat template: give --chat-template FILE or one of chatml, llama3, gemma, phi3, mistral$/,
      ],
      [
        ["run", tiny, "--chat", "--chat-template", "/no/such.jinja", "-p", "Hi"],
        /cannot read chat template file "\/no\/such.jinja": ENOENT$/,
      ],
      [
        ["chat", tiny, "--chat-template", "/no/such.jinja"],
        /cannot read chat template file "\/no\/such.jinja": ENOENT$/,
      ],
      [
        ["run", tiny, "--chat", "--chat-template", bad, "-p", "Hi"],
        /the chat template raised an exception: roles must alternate$/,
      ],
      [
        ["chat", tiny, "--chat-template", bad],
        /the chat template raised an exception: roles must alternate$/,
      ],
      [
        ["run", tiny, "--chat", "--chat-template", broken, "-p", "Hi"],
        /the chat template does not compile: /,
      ],
    ];
    for (const [args, message] of cases) {
      const out = await cli(args, "Hi\n");
      assert.equal(out.code, 1, `${args.join(" ")}: ${out.stderr}`);
      const lines = out.stderr.trimEnd().split("\n");
      assert.equal(lines.length, 1, out.stderr);
      assert.match(lines[0], /^dotllm: /);
      assert.match(lines[0], message);
    }
  } finally {
    await Deno.remove(bad);
    await Deno.remove(broken);
  }
});

Deno.test("run --chat: the prompt through the template, --system, --json includes the rendered prompt", async () => {
  const tiny = tinyChatModel();
  const out = await cli([
    "run",
    tiny,
    "--chat",
    "--system",
    "Be brief.",
    "-n",
    "4",
    "--temp",
    "0",
    "--json",
  ], "What is 2+2?\n");
  assert.equal(out.code, 0, out.stderr);
  const result = JSON.parse(out.stdout);
  assert.equal(
    result.prompt,
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
  );
  // The same tokens as the plain run of the rendered text.
  const plain = await cli(["run", tiny, "-p", result.prompt, "-n", "4", "--temp", "0", "--json"]);
  assert.deepEqual(JSON.parse(plain.stdout).tokens, result.tokens);
  assert.equal(result.usage.prompt_tokens, JSON.parse(plain.stdout).usage.prompt_tokens);
});

// ---- a real terminal -------------------------------------------------------

const decoder = new TextDecoder();

async function sh(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  const o = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  return { code: o.code, out: decoder.decode(o.stdout) + decoder.decode(o.stderr) };
}

/** tmux, installed with apt-get when missing (as the brief asks: no silent skip). */
async function ensureTmux(): Promise<void> {
  if ((await sh("sh", ["-c", "command -v tmux"])).code === 0) return;
  const update = await sh("apt-get", ["update"]);
  assert.equal(update.code, 0, update.out);
  const install = await sh("apt-get", ["install", "-y", "tmux"]);
  assert.equal(install.code, 0, install.out);
}

async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 120_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

Deno.test("chat: in a terminal (tmux): two turns, a multi-line message, Ctrl-C mid-reply, /clear, Ctrl-D", async () => {
  await ensureTmux();
  // A 135M-parameter shape, so a reply takes long enough to interrupt.
  const model = makeModel({
    shape: "smollm-135m",
    type: "q8_0",
    outDir: join(repoRoot, "models"),
    vocabDir: testdata("vocab-converted"),
  }).path;
  const n = 96;
  const session = `dotllm-chat-${Deno.pid}`;
  const log = await Deno.makeTempFile({ suffix: ".log" });
  const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
  const command = [
    Deno.execPath(),
    ...DENO_ARGS,
    "chat",
    model,
    "-n",
    String(n),
    "--temp",
    "1",
    "-s",
    "5",
    "-c",
    "1024",
    "-t",
    "2",
  ]
    .map(quote).join(" ") + ` 2>${quote(log)}; echo EXIT=$?; sleep 60`;
  const tmux = (...args: string[]) => sh("tmux", args);
  const started = await tmux(
    "new-session",
    "-d",
    "-s",
    session,
    "-x",
    "160",
    "-y",
    "50",
    "-e",
    "NO_COLOR=1",
    command,
  );
  assert.equal(started.code, 0, started.out);
  const screen = async () =>
    (await tmux("capture-pane", "-p", "-J", "-t", session, "-S", "-1000")).out;
  const noteCount = async (count: number) => {
    const found = notes(await Deno.readTextFile(log));
    return found.length >= count ? found : undefined;
  };
  const keys = (...k: string[]) => tmux("send-keys", "-t", session, ...k);
  try {
    await waitFor("the prompt", async () => (await screen()).includes("> ") ? true : undefined);
    await keys("-l", "Hello there");
    await keys("Enter");
    const [first] = await waitFor("turn 1", () => noteCount(1));
    assert.equal(first.cached, 0);
    assert.equal(first.generated, n);

    // A multi-line message: a trailing backslash continues it.
    await keys("-l", "Tell me\\");
    await keys("Enter");
    await waitFor(
      "the continuation prompt",
      async () => (await screen()).includes("... ") ? true : undefined,
    );
    await keys("-l", "more");
    await keys("Enter");
    const [, second] = await waitFor("turn 2", () => noteCount(2));
    const common = first.prefilled + n - 1; // kept from a multiple of 8 on
    assert.equal(second.cached, common - common % 8, JSON.stringify(second));
    assert.equal(second.prefilled, 1 + nextTurnTokens(model, "Tell me\nmore") + common % 8);

    // Ctrl-C once the reply has started.
    const before = (await screen()).length;
    await keys("-l", "And then?");
    await keys("Enter");
    await waitFor(
      "the reply to start",
      async () => (await screen()).length > before + 12 ? true : undefined,
    );
    await keys("C-c");
    const [, , third] = await waitFor("turn 3", () => noteCount(3));
    assert.ok(third.interrupted, JSON.stringify(third));
    assert.ok(third.generated < n, JSON.stringify(third));
    await waitFor(
      "(interrupted)",
      async () => (await screen()).includes("(interrupted)") ? true : undefined,
    );

    // The conversation survived the interrupt: the next turn continues from the cache.
    await keys("-l", "Go on");
    await keys("Enter");
    const [, , , fourth] = await waitFor("turn 4", () => noteCount(4));
    assert.ok(fourth.cached >= second.cached + second.prefilled, JSON.stringify(fourth));

    await keys("-l", "/clear");
    await keys("Enter");
    await waitFor(
      "(conversation cleared)",
      async () => (await screen()).includes("(conversation cleared)") ? true : undefined,
    );
    await keys("-l", "Hello there");
    await keys("Enter");
    const [, , , , fifth] = await waitFor("turn 5", () => noteCount(5));
    // Cleared: only the template's default system prompt is reused.
    assert.ok(fifth.cached > 10 && fifth.cached < first.prefilled, JSON.stringify(fifth));

    await waitFor(
      "the prompt again",
      async () => (await screen()).trimEnd().endsWith(">") ? true : undefined,
    );
    await keys("C-d");
    const final = await waitFor("exit", async () => {
      const s = await screen();
      return s.includes("EXIT=") ? s : undefined;
    });
    assert.match(final, /EXIT=0/);
    assert.match(final, /dotllm chat: \/help for commands, Ctrl-D to quit/);
    assert.match(final, /> Hello there\n/);
    assert.match(final, /> Tell me\\\n\.\.\. more\n/);
    assert.match(final, /> And then\?\n[^\n]*\n*\(interrupted\)\n/);
    assert.match(final, /> \/clear\n\(conversation cleared\)\n/);
  } finally {
    await tmux("kill-session", "-t", session);
    await Deno.remove(log);
  }
});

// ---- Bun, and the single executable -----------------------------------------

async function execOut(cmd: string, args: string[], input: string, cwd = repoRoot) {
  const child = new Deno.Command(cmd, {
    args,
    cwd,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  })
    .spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(input));
  await writer.close();
  const out = await child.output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

Deno.test("chat under Bun and in the Bun single executable: the same conversation as under Deno", async () => {
  const tiny = tinyChatModel();
  const args = ["chat", tiny, "-n", "5", "--temp", "1", "-s", "11", "-t", "1", "-q"];
  const input = "Hi\nTell me more\n";
  const deno = await cli(args, input);
  assert.equal(deno.code, 0, deno.stderr);
  const bun = await execOut("bun", [join(repoRoot, "cli.ts"), ...args], input);
  assert.equal(bun.code, 0, bun.stderr);
  assert.equal(bun.stdout, deno.stdout);

  const dir = await Deno.makeTempDir();
  try {
    const exe = join(dir, "dotllm");
    const compile = await execOut(Deno.execPath(), [
      "run",
      "--quiet",
      "--allow-run",
      "--allow-read",
      "--allow-env",
      join(repoRoot, "scripts/compile.ts"),
      "bun",
      exe,
    ], "");
    assert.equal(compile.code, 0, compile.stderr);
    const alone = await execOut(exe, args, input, dir);
    assert.equal(alone.code, 0, alone.stderr);
    assert.equal(alone.stdout, deno.stdout);
    const rendered = await execOut(
      exe,
      ["run", tiny, "--chat", "--chat-template", "llama3", "-p", "Hi", "-n", "1", "--json"],
      "",
      dir,
    );
    assert.equal(rendered.code, 0, rendered.stderr);
    assert.equal(
      JSON.parse(rendered.stdout).prompt,
      "<|im_start|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("chat --tools: a required call is printed as a JSON line, and the next turn sees it (SmolLM2 Q4_1, Qwen 2.5 template)", async () => {
  const { ensureLlamaCppSource } = await import("./_llamacpp_src.ts");
  const template = join(
    ensureLlamaCppSource(),
    "models",
    "templates",
    "Qwen-Qwen2.5-7B-Instruct.jinja",
  );
  const tools = await Deno.makeTempFile({ suffix: ".json" });
  try {
    await Deno.writeTextFile(
      tools,
      JSON.stringify([{
        type: "function",
        function: {
          name: "get_weather",
          parameters: {
            type: "object",
            properties: { city: { type: "string", maxLength: 20 } },
            required: ["city"],
            additionalProperties: false,
          },
        },
      }]),
    );
    const model = testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    const args = ["chat", model, "--chat-template", template, "--tools", tools, "--temp", "0"];
    const out = await cli(
      [...args, "--tool-choice", "required", "-c", "1024", "-t", "2", "-n", "60"],
      "What is the weather in Oslo?\nAnd in Rome?\n",
    );
    assert.equal(out.code, 0, out.stderr);
    const lines = out.stdout.split("\n").filter((l) => l.startsWith('{"tool_calls"'));
    assert.equal(lines.length, 2, out.stdout);
    for (const line of lines) {
      const { tool_calls } = JSON.parse(line);
      assert.equal(tool_calls[0].name, "get_weather");
      assert.equal(typeof tool_calls[0].arguments.city, "string");
    }
    // the second turn prefilled only its own message: the first reply, calls and all, was cached
    const [first, second] = notes(out.stderr);
    assert.ok(second.cached >= first.prefilled, JSON.stringify([first, second]));
    const bad = await cli([...args, "--tool-choice", "nope"], "");
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /tool_choice\.function\.name: "nope" is not one of the tools/);
  } finally {
    await Deno.remove(tools);
  }
});

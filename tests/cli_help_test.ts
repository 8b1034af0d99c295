/** `dotllm --help`, `--version`, every command's `--help`, usage errors, colour. */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { loadCommands } from "../cli.ts";
import { VERSION } from "../src/version.ts";
import { runBun, runDeno } from "./_cli.ts";
import { exec } from "./_ship.ts";
import { repoRoot } from "./_testdata.ts";

const commands = await loadCommands();

Deno.test("--help lists every command; --version matches deno.json; Bun prints the same", async () => {
  for (const args of [["--help"], ["-h"], ["help"]]) {
    const out = await runDeno(args);
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stderr, "");
    const lines = out.stdout.split("\n");
    for (const c of commands) {
      const listed = lines.some((l) => l.startsWith(`  ${c.name} `) && l.endsWith(` ${c.summary}`));
      assert.ok(listed, c.name);
    }
  }
  const version = JSON.parse(readFileSync(join(repoRoot, "deno.json"), "utf8")).version;
  assert.equal(VERSION, version);
  for (const args of [["--version"], ["-V"]]) {
    assert.deepEqual(await runDeno(args), { code: 0, stdout: `dotllm ${version}\n`, stderr: "" });
  }
  assert.deepEqual(await runBun(["--version"]), await runDeno(["--version"]));
  assert.deepEqual(await runBun(["--help"]), await runDeno(["--help"]));
});

Deno.test("every command's --help documents exactly its options", async () => {
  for (const c of commands) {
    const out = await runDeno([c.name, "--help"]);
    assert.equal(out.code, 0, out.stderr);
    assert.ok(out.stdout.startsWith(`Usage: dotllm ${c.name} `), out.stdout);
    assert.deepEqual(await runDeno(["help", c.name]), out);
    const documented = new Set(
      [...out.stdout.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)].map((m) => m[1]),
    );
    documented.delete("help");
    assert.deepEqual([...documented].sort(), Object.keys(c.options).sort(), c.name);
    for (const [name, option] of Object.entries(c.options)) {
      if (option.short) assert.ok(out.stdout.includes(`-${option.short}, --${name}`), name);
    }
  }
});

Deno.test("usage errors: exit 2, nothing on stdout, one line naming the help to read", async () => {
  const cases: [string[], RegExp][] = [
    [[], /^dotllm: missing command \(see `dotllm --help`\)\n$/],
    [["frobnicate"], /^dotllm: unknown command "frobnicate" \(see `dotllm --help`\)\n$/],
    [["help", "frobnicate"], /^dotllm: unknown command "frobnicate" /],
    [["run"], /^dotllm: missing MODEL .*\(see `dotllm run --help`\)\n$/],
    [
      ["run", "m.gguf", "--bogus"],
      /^dotllm: Unknown option '--bogus' \(see `dotllm run --help`\)\n$/,
    ],
    [
      ["inspect", "--bogus"],
      /^dotllm: Unknown option '--bogus' \(see `dotllm inspect --help`\)\n$/,
    ],
    [["run", "m.gguf", "-n"], /^dotllm: .*n-predict.* \(see `dotllm run --help`\)\n$/],
  ];
  for (const [args, message] of cases) {
    const out = await runDeno(args);
    assert.equal(out.code, 2, args.join(" "));
    assert.equal(out.stdout, "");
    assert.match(out.stderr, message);
    assert.equal(out.stderr.split("\n").length, 2, out.stderr);
  }
  const failure = await runDeno(["inspect", "/nonexistent.gguf"]);
  assert.equal(failure.code, 1);
  assert.match(failure.stderr, /^dotllm: [^\n]*\n$/);
});

const script = "/usr/bin/script";

Deno.test({
  name: "colour only on a terminal, and never with NO_COLOR",
  ignore: !existsSync(script),
  async fn() {
    const cli = join(repoRoot, "cli.ts");
    const command = `${Deno.execPath()} run --quiet -A ${cli} frobnicate`;
    // `script` runs the command on a pseudo-terminal: stderr is a TTY.
    // NO_COLOR="" counts as unset (no-color.org).
    const tty = await exec(script, ["-qec", command, "/dev/null"], {
      env: { TERM: "xterm", NO_COLOR: "" },
    });
    const red = "\x1b[1;31mdotllm:\x1b[0m";
    assert.ok(tty.stdout.includes(`${red} unknown command "frobnicate"`), tty.stdout);
    const noColor = await exec(script, ["-qec", command, "/dev/null"], {
      env: { TERM: "xterm", NO_COLOR: "1" },
    });
    assert.match(noColor.stdout, /^dotllm: unknown command "frobnicate"/);
    assert.ok(!noColor.stdout.includes("\x1b"), noColor.stdout);
    const piped = await runDeno(["frobnicate"]);
    assert.ok(!piped.stderr.includes("\x1b"), piped.stderr);
  },
});

Deno.test({
  name: "the warm-up progress line: drawn and erased on a terminal, absent when piped",
  ignore: !existsSync(script),
  async fn() {
    const code = `import { warmUp } from ${JSON.stringify(join(repoRoot, "src/cli/terminal.ts"))};
      const bytes = new Uint8Array(96 << 20).fill(1);
      console.log("sum", warmUp(bytes, "big.gguf"));`;
    const deno = `${Deno.execPath()} eval --quiet '${code.replaceAll("\n", " ")}'`;
    const tty = await exec(script, ["-qec", deno, "/dev/null"], { env: { NO_COLOR: "1" } });
    assert.equal(tty.code, 0, tty.stdout);
    const line = /\rdotllm: loading big\.gguf +(\d+)% \((\d+)\/96 MiB\)/.exec(tty.stdout);
    assert.ok(line, JSON.stringify(tty.stdout));
    assert.match(tty.stdout, /\r +\rsum 24576/, "the line is erased before later output");
    const piped = await exec(Deno.execPath(), ["eval", "--quiet", code]);
    assert.equal(piped.code, 0, piped.stderr);
    assert.equal(piped.stderr, "");
    assert.equal(piped.stdout, "sum 24576\n");
  },
});

/**
 * Structured output from the command line and the library, on the real
 * SmolLM2-135M-Instruct Q4_1: `run` with llama.cpp's four flags (output
 * that parses and validates, with ajv), `chat` with a grammar on every
 * reply, `Llm.completeJson`, and the one-line errors (exit 2) for a grammar
 * or schema that cannot be used.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Llm } from "../mod.ts";
import { validator } from "./_ajv.ts";
import { runDeno } from "./_cli.ts";
import { SMOLLM2_Q4_1 } from "./_server.ts";

const BOOK = {
  type: "object",
  properties: {
    title: { type: "string", maxLength: 40 },
    year: { type: "integer", minimum: 1800, maximum: 2030 },
    genre: { enum: ["fiction", "history", "science"] },
    published: { type: "string", format: "date" },
  },
  required: ["title", "year", "genre", "published"],
  additionalProperties: false,
};

async function run(...args: string[]) {
  return await runDeno(["run", SMOLLM2_Q4_1, "-n", "96", "-t", "2", "-c", "512", "-q", ...args]);
}

Deno.test("run: -j, --json-schema-file, --grammar and --grammar-file constrain the output", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dotllm-grammar-"));
  try {
    const valid = validator(BOOK);
    // greedy, and sampled at temperature 1 with two seeds: each output validates
    for (
      const sampling of [["--temp", "0"], ["--temp", "1", "-s", "7"], ["--temp", "1", "-s", "8"]]
    ) {
      const out = await run(
        "-p",
        "A book record:",
        "-j",
        JSON.stringify(BOOK),
        ...sampling,
        "--json",
      );
      assert.equal(out.code, 0, out.stderr);
      const result = JSON.parse(out.stdout);
      assert.equal(result.finish_reason, "stop", result.text);
      const value = JSON.parse(result.text);
      assert.ok(valid(value), `${result.text}: ${JSON.stringify(valid.errors)}`);
    }
    const schemaFile = join(dir, "schema.json");
    writeFileSync(
      schemaFile,
      JSON.stringify({ type: "array", items: { type: "integer" }, minItems: 2, maxItems: 4 }),
    );
    const arr = await run("-p", "Some numbers:", "--json-schema-file", schemaFile, "--temp", "0");
    assert.equal(arr.code, 0, arr.stderr);
    const numbers = JSON.parse(arr.stdout);
    assert.ok(Array.isArray(numbers) && numbers.length >= 2 && numbers.length <= 4, arr.stdout);
    assert.ok(numbers.every((n: unknown) => Number.isInteger(n)), arr.stdout);

    const yesNo = await run(
      "-p",
      "Is the sky blue? Answer:",
      "--grammar",
      'root ::= ("yes" | "no") "."',
      "--temp",
      "0",
    );
    assert.equal(yesNo.code, 0, yesNo.stderr);
    assert.match(yesNo.stdout, /^(yes|no)\.$/);
    const grammarFile = join(dir, "date.gbnf");
    writeFileSync(grammarFile, 'root ::= [0-9]{4} "-" [0-1] [0-9] "-" [0-3] [0-9]\n');
    const date = await run("-p", "Today's date:", "--grammar-file", grammarFile, "--temp", "0");
    assert.equal(date.code, 0, date.stderr);
    assert.match(date.stdout, /^\d{4}-[01]\d-[0-3]\d$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("run: a grammar or schema that cannot be used is one line and exit 2", async () => {
  const cases: [string[], RegExp][] = [
    [["--grammar", 'root ::= "a"\nitem ::= "b" | c'], /undefined rule 'c'/],
    [["--grammar", 'root ::= "a" |\n  "b" ]'], /line 2, column 7/],
    [["--grammar", "root ::= <no-such-token>"], /invalid token '<no-such-token>'/],
    [["--grammar", "root ::= <[999999]>"], /outside the vocabulary/],
    [["-j", '{"type": "number", "multipleOf": 3}'], /"multipleOf" at the root is not supported/],
    [
      ["-j", '{"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}'],
      /pattern/,
    ],
    [["-j", "{not json"], /--json-schema: not JSON/],
    [["--grammar-file", "/nonexistent/g.gbnf"], /--grammar-file: cannot read/],
    [["--grammar", 'root ::= "a"', "-j", "{}"], /give one of --grammar, --json-schema/],
  ];
  for (const [args, message] of cases) {
    const out = await run("-p", "x", ...args);
    assert.equal(out.code, 2, `${args.join(" ")}: ${out.stderr}`);
    assert.match(out.stderr, message, args.join(" "));
    assert.equal(out.stderr.trim().split("\n").length, 1, out.stderr);
    assert.equal(out.stdout, "");
  }
});

Deno.test("chat: --grammar constrains every reply", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "cli.ts",
      "chat",
      SMOLLM2_Q4_1,
      "-q",
      "-t",
      "2",
      "-c",
      "1024",
      "--temp",
      "0",
      "-n",
      "32",
      "--grammar",
      'root ::= ("Yes" | "No") ", " [a-z ]{1,20} "."',
    ],
    cwd: new URL("..", import.meta.url).pathname,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const writer = out.stdin.getWriter();
  await writer.write(new TextEncoder().encode("Is water wet?\nIs fire cold?\n"));
  await writer.close();
  const { code, stdout, stderr } = await out.output();
  const text = new TextDecoder().decode(stdout);
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  const replies = text.split("\n\n").map((s) => s.trim()).filter((s) => s.length > 0);
  assert.equal(replies.length, 2, text);
  for (const reply of replies) assert.match(reply, /^(Yes|No), [a-z ]{1,20}\.$/);
});

Deno.test("library: completeJson returns the parsed value; options refuse what cannot be enforced", async () => {
  const llm = await Llm.load(SMOLLM2_Q4_1, { threads: 2, contextSize: 512 });
  try {
    const value = await llm.completeJson("A book record:", {
      jsonSchema: BOOK,
      temperature: 0,
      maxTokens: 96,
    });
    assert.ok(validator(BOOK)(value), JSON.stringify(value));
    // the same request through complete(): the same text
    const text =
      (await llm.complete("A book record:", { jsonSchema: BOOK, temperature: 0, maxTokens: 96 }))
        .text;
    assert.deepEqual(JSON.parse(text), value);
    await assert.rejects(
      llm.completeJson("A book record:", { jsonSchema: BOOK, temperature: 0, maxTokens: 3 }),
      /incomplete: generation ended with "length" after 3 tokens/,
    );
    await assert.rejects(
      llm.complete("x", { jsonSchema: { type: "string", format: "email" } }),
      /"format"/,
    );
    await assert.rejects(llm.complete("x", { grammar: "root ::= (" }), /GrammarError|grammar:/);
    // a grammar object per generation: two generations in turn do not share state
    const a = await llm.complete("Count:", { grammar: "root ::= [0-9] [0-9]", temperature: 0 });
    const b = await llm.complete("Count:", { grammar: "root ::= [0-9] [0-9]", temperature: 0 });
    assert.match(a.text, /^\d\d$/);
    assert.equal(a.text, b.text);
  } finally {
    llm.close();
  }
});

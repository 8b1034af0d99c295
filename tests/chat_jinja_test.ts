/**
 * The Jinja engine port (src/chat/jinja/) against llama.cpp's own engine
 * tests: every `test_template` case of llama.cpp's `tests/test-jinja.cpp`
 * (template, variables, expected output; `golden/chat_render/jinja_cases.jsonl`)
 * renders to the expected text, or raises "NotImplemented" where llama.cpp
 * skips the case for the same reason.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  capsOf,
  Context,
  fromJson,
  JinjaError,
  parse,
  render,
  renderTemplate,
} from "../src/chat/jinja/mod.ts";
import type { Value } from "../src/chat/jinja/value.ts";

interface Case {
  group: string;
  name: string;
  template: string;
  vars: Record<string, unknown>;
  expect: string;
}

const cases: Case[] = readFileSync(
  new URL("./golden/chat_render/jinja_cases.jsonl", import.meta.url),
  "utf8",
).trim().split("\n").map((line) => JSON.parse(line));

/** Cases llama.cpp's engine skips with its NotImplemented exception (so does the port). */
const NOT_IMPLEMENTED = [
  "filters: tojson sort_keys=true",
  "tests: is escaped",
  "tests: is filter",
  "string methods: string.replace() with count",
  "string methods: string.format() manual numbering",
  "string methods: string.format() named fields",
  "string methods: string.format() escaped braces",
  "array methods: array|map with filter",
];

Deno.test("jinja: llama.cpp's test-jinja.cpp cases render as llama.cpp's engine renders them", () => {
  assert.ok(cases.length >= 300, String(cases.length));
  const failures: string[] = [];
  const skipped: string[] = [];
  for (const c of cases) {
    let got: string;
    try {
      got = renderTemplate(c.template, c.vars);
    } catch (error) {
      if (error instanceof JinjaError && error.notImplemented) {
        skipped.push(`${c.group}: ${c.name}`);
        continue;
      }
      failures.push(`${c.group}: ${c.name}: threw ${(error as Error).message.split("\n").pop()}`);
      continue;
    }
    if (got !== c.expect) {
      failures.push(`${c.group}: ${c.name}: ${JSON.stringify(got)} != ${JSON.stringify(c.expect)}`);
    }
  }
  console.log(
    `jinja: ${
      cases.length - failures.length - skipped.length
    } of ${cases.length} identical, ${skipped.length} not implemented`,
  );
  for (const f of failures) console.log("  " + f);
  assert.deepEqual(failures, []);
  assert.deepEqual(skipped, NOT_IMPLEMENTED);
});

Deno.test("jinja: usage stats mark what a render read (test-jinja.cpp's stats case)", () => {
  const source = "{{val.num}} {{val.str}} {{val.arr[0]}} {{val.obj.key1}} {{val.nested | tojson}}";
  const program = parse(source);
  const ctx = new Context(program.source);
  ctx.set(
    "val",
    fromJson({
      num: 1,
      str: "abc",
      arr: [1, 2, 3],
      obj: { key1: 1, key2: 2, key3: 3 },
      nested: { inner_key1: [1, 2], inner_key2: { a: "x", b: "y" } },
      mixed: { used: 1, unused: 2 },
    }),
  );
  ctx.stats = true;
  render(program, ctx);
  const val = ctx.get("val");
  const used = (v: Value | undefined) => v !== undefined && v.hasStats && v.stats.used;
  const at = (v: Value, key: string) => v.getKey(key)!;
  assert.ok(used(at(val, "num")));
  assert.ok(used(at(val, "str")));
  assert.ok(used(at(val, "arr")));
  assert.ok(used(at(val, "arr").arr[0]));
  assert.ok(!used(at(val, "arr").arr[1]));
  assert.ok(used(at(val, "obj")));
  assert.ok(used(at(at(val, "obj"), "key1")));
  assert.ok(!used(at(at(val, "obj"), "key2")));
  assert.ok(used(at(at(val, "nested"), "inner_key1").arr[0]));
  assert.ok(used(at(at(at(val, "nested"), "inner_key2"), "a")));
});

Deno.test("jinja: content caps as llama.cpp probes them (test-jinja.cpp's caps cases)", () => {
  const caps = (source: string) => capsOf(parse(source));
  const plain = caps(
    "{% for message in messages %}{{ message['role'] + ': ' + message['content'] }}{% endfor %}",
  );
  assert.ok(plain.supportsStringContent);
  assert.ok(!plain.supportsTypedContent);
  const typed = caps(
    "{% for message in messages %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] }}{% endfor %}{% endfor %}",
  );
  assert.ok(!typed.supportsStringContent);
  assert.ok(typed.supportsTypedContent);
  const dropping = caps(
    "{% for message in messages %}{{ message['content'][0]['text'] }}{% endfor %}",
  );
  assert.ok(!dropping.supportsStringContent);
  assert.ok(dropping.supportsTypedContent);
});

Deno.test("jinja: errors carry llama.cpp's source excerpt and the template's own message", () => {
  assert.throws(
    () => renderTemplate("line one\n{{ raise_exception('bad role') }}", {}),
    (e) =>
      e instanceof JinjaError && e.raised && e.reason === "Jinja Exception: bad role" &&
      e.message ===
        "\n------------\nWhile executing CallExpression at line 2, column 19 in source:\n" +
          "...line one↵{{ raise_exception('bad role') }}...\n" +
          " ".repeat(30) + "^\nError: Jinja Exception: bad role",
  );
  assert.throws(() => parse("{% if x %}"), JinjaError);
  assert.throws(() => parse("{{ 'unterminated }}"), JinjaError);
  // Lenient where Jinja2 raises: a loop over undefined, none + string, a missing key.
  assert.equal(
    renderTemplate("{% for x in nope %}x{% endfor %}{{ none ~ 'a' }}{{ d.missing }}|", { d: {} }),
    "a|",
  );
});

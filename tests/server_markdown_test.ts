/**
 * The chat page's markdown parser (`src/server/markdown.ts`): the blocks and
 * inline runs of replies as models write them, links kept only with a safe
 * scheme, markup kept as text, streaming (an unclosed fence), bounded work on
 * hostile input, and the embedded source text behaving as the module does.
 */
import assert from "node:assert/strict";
import { MARKDOWN_SOURCE, parseMarkdown } from "../src/server/markdown.ts";
import { CHAT_PAGE } from "../src/server/page.ts";

const text = (t: string) => ({ type: "text", text: t });
const paragraph = (...children: unknown[]) => ({ type: "paragraph", children });

Deno.test("markdown: fenced code keeps its text verbatim, with the language; an unclosed fence runs to the end", () => {
  assert.deepEqual(
    parseMarkdown("Here:\n\n```python\ndef f(a, b):\n    return a * b  # **not bold**\n```\nDone."),
    [
      paragraph(text("Here:")),
      {
        type: "code",
        lang: "python",
        text: "def f(a, b):\n    return a * b  # **not bold**",
        open: false,
      },
      paragraph(text("Done.")),
    ],
  );
  assert.deepEqual(parseMarkdown("~~~\n<b>x</b>\n```\n~~~"), [
    { type: "code", lang: "", text: "<b>x</b>\n```", open: false },
  ]);
  assert.deepEqual(parseMarkdown("```js\nlet a = 1;\n"), [
    { type: "code", lang: "js", text: "let a = 1;\n", open: true },
  ]);
  // An info string that is not a plain language name is not used as one.
  assert.equal((parseMarkdown('```"><script>\nx\n```')[0] as { lang: string }).lang, "");
});

Deno.test("markdown: inline code, bold, italic, strikethrough, escapes, line breaks", () => {
  assert.deepEqual(
    parseMarkdown(
      "Use `a*b` and ``x ` y``, **bold**, *it*, _it_, ***both***, ~~gone~~.\nNext \\*line\\*",
    ),
    [
      paragraph(
        text("Use "),
        { type: "code", text: "a*b" },
        text(" and "),
        { type: "code", text: "x ` y" },
        text(", "),
        { type: "strong", children: [text("bold")] },
        text(", "),
        { type: "em", children: [text("it")] },
        text(", "),
        { type: "em", children: [text("it")] },
        text(", "),
        { type: "strong", children: [{ type: "em", children: [text("both")] }] },
        text(", "),
        { type: "del", children: [text("gone")] },
        text("."),
        { type: "break" },
        text("Next *line*"),
      ),
    ],
  );
  // Underscores inside words, lone stars and unclosed runs stay text.
  assert.deepEqual(parseMarkdown("snake_case_name, 2 * 3 * 4, **open"), [
    paragraph(text("snake_case_name, 2 * 3 * 4, **open")),
  ]);
});

Deno.test("markdown: headings, lists (nested, ordered with a start), quotes, rules, tables", () => {
  const blocks = parseMarkdown(
    "## Steps\n\n3. first\n4. second\n   - sub *a*\n   - sub b\n\n> quoted\n> **text**\n\n---\n\n| a | b |\n|:--|--:|\n| 1 | `2` |",
  );
  assert.deepEqual(
    blocks,
    [
      { type: "heading", level: 2, children: [text("Steps")] },
      {
        type: "list",
        ordered: true,
        start: 3,
        items: [
          [paragraph(text("first"))],
          [paragraph(text("second")), {
            type: "list",
            ordered: false,
            start: 1,
            items: [
              [paragraph(text("sub "), { type: "em", children: [text("a")] })],
              [paragraph(text("sub b"))],
            ],
          }],
        ],
      },
      {
        type: "quote",
        children: [paragraph(text("quoted"), { type: "break" }, {
          type: "strong",
          children: [text("text")],
        })],
      },
      { type: "rule" },
      {
        type: "table",
        align: ["left", "right"],
        head: [[text("a")], [text("b")]],
        rows: [[[text("1")], [{ type: "code", text: "2" }]]],
      },
    ],
  );
  // A list right after a paragraph line, and blank lines between items, keep one list.
  assert.deepEqual(parseMarkdown("Items:\n- a\n\n- b").map((b) => b.type), ["paragraph", "list"]);
  assert.equal((parseMarkdown("- a\n\n- b")[0] as { items: unknown[] }).items.length, 2);
  // Inside a paragraph, a line opening with a number is text unless the number is 1.
  assert.deepEqual(parseMarkdown("It ended in\n1999. Then\n1. one").map((b) => b.type), [
    "paragraph",
    "list",
  ]);
});

Deno.test("markdown: links keep http(s) and mailto targets only; markup is text", () => {
  const link = (href: string, label: string) => ({ type: "link", href, children: [text(label)] });
  assert.deepEqual(
    parseMarkdown(
      "[a](https://x.org/p?q=1) [b](javascript:alert(1)) [c](JAVASCRIPT:x) [d](data:text/html,x) " +
        "[e](/local) [f](mailto:me@x.org) <https://y.org> see http://z.org/a_b. " +
        "[g](https://x.org/\u0000y) <img src=x onerror=alert(1)>",
    ),
    [paragraph(
      link("https://x.org/p?q=1", "a"),
      text(" "),
      text("b"),
      text(" "),
      text("c"),
      text(" "),
      text("d"),
      text(" "),
      text("e"),
      text(" "),
      link("mailto:me@x.org", "f"),
      text(" "),
      link("https://y.org", "https://y.org"),
      text(" see "),
      link("http://z.org/a_b", "http://z.org/a_b"),
      text(". "),
      text("g"),
      text(" <img src=x onerror=alert(1)>"),
    )],
  );
});

Deno.test("markdown: hostile input parses in bounded time and depth", () => {
  const inputs = [
    "*".repeat(20_000),
    "*a ".repeat(5_000),
    "**a ".repeat(5_000), // quadratic when each unclosed opener scanned to the end
    "_a ".repeat(5_000),
    "[".repeat(5_000) + "x" + "](https://a)".repeat(100),
    "> ".repeat(2_000) + "deep",
    "- ".repeat(2_000) + "deep",
    "`".repeat(10_000),
    "| a |\n|---|\n" + "| x |\n".repeat(5_000),
  ];
  for (const input of inputs) {
    const started = performance.now();
    const blocks = parseMarkdown(input);
    const ms = performance.now() - started;
    assert.ok(blocks.length > 0);
    assert.ok(ms < 2_000, `${JSON.stringify(input.slice(0, 20))}: ${ms.toFixed(0)} ms`);
  }
});

Deno.test("markdown: the page embeds the parser's source, and that source parses as the module does", () => {
  // Embedded as an expression bound to the name the page calls: a minifier (bun build --minify
  // of the single executable) renames the function itself.
  const declaration = `const parseMarkdown = ${MARKDOWN_SOURCE};`;
  assert.ok(CHAT_PAGE.includes(declaration));
  // The page never writes HTML from strings.
  assert.ok(!/innerHTML|outerHTML|insertAdjacentHTML|document\.write/.test(CHAT_PAGE));
  // As a minifier leaves it: the function renamed.
  const renamed = declaration.replace("= function parseMarkdown(", "= function K(");
  assert.notEqual(renamed, declaration);
  const embedded = new Function(`${renamed}\nreturn parseMarkdown;`)() as typeof parseMarkdown;
  const sample = "# T\n\n```ts\nx\n```\n\n- **a** [l](https://a.b)\n\n| a |\n|---|\n| 1 |";
  assert.deepEqual(embedded(sample), parseMarkdown(sample));
});

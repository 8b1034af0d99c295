/**
 * The chat page's markdown: a small parser from a model's reply to a tree of
 * blocks and inline runs (fenced code, inline code, bold, italic,
 * strikethrough, headings, lists, quotes, tables, rules, links, paragraphs).
 * It produces data, never HTML: the page builds elements from the tree with
 * `createElement` and `textContent`, so no text of the model's is ever parsed
 * as HTML. A link keeps its target only when it is `http:`, `https:` or
 * `mailto:` without whitespace or control characters; any other link is shown
 * as its text.
 *
 * {@linkcode parseMarkdown} is self-contained (no imports, no outer names), so
 * the page embeds its source text ({@linkcode MARKDOWN_SOURCE}) as an
 * expression (a minifier may rename the function) and the browser runs the
 * same code the tests run here.
 *
 * @example
 * ```ts
 * import { parseMarkdown } from "./markdown.ts";
 * const [code] = parseMarkdown("~~~py\nprint(1)\n~~~");
 * if (code.type !== "code" || code.lang !== "py" || code.text !== "print(1)") throw new Error();
 * ```
 *
 * @module
 */

/** An inline run of text. */
export type MdInline =
  | { type: "text"; text: string }
  | { type: "code"; text: string }
  | { type: "strong" | "em" | "del"; children: MdInline[] }
  | { type: "link"; href: string; children: MdInline[] }
  | { type: "break" };

/** A block. A code block still `open` had no closing fence (a reply still streaming). */
export type MdBlock =
  | { type: "code"; lang: string; text: string; open: boolean }
  | { type: "heading"; level: number; children: MdInline[] }
  | { type: "paragraph"; children: MdInline[] }
  | { type: "list"; ordered: boolean; start: number; items: MdBlock[][] }
  | { type: "quote"; children: MdBlock[] }
  | {
    type: "table";
    align: ("left" | "center" | "right" | "")[];
    head: MdInline[][];
    rows: MdInline[][][];
  }
  | { type: "rule" };

/** The blocks of `source`. Nesting deeper than 16 levels is kept as text. */
export function parseMarkdown(source: string): MdBlock[] {
  const MAX_DEPTH = 16;
  const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*))?$/;
  const TABLE_DELIMITER = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
  const PUNCTUATION = /[!-/:-@[-`{-~]/;
  const WORD = /[\p{L}\p{N}]/u;

  const isBlank = (line: string) => /^[ \t]*$/.test(line);
  const indentOf = (line: string) => /^[ \t]*/.exec(line)![0].replace(/\t/g, "    ").length;
  const dedent = (line: string, n: number) => {
    let i = 0, width = 0;
    while (i < line.length && width < n && (line[i] === " " || line[i] === "\t")) {
      width += line[i] === "\t" ? 4 : 1;
      i++;
    }
    return line.slice(i);
  };

  function safeHref(raw: string): string | null {
    const url = raw.trim().replace(/^<(.*)>$/, "$1");
    // deno-lint-ignore no-control-regex
    if (/[\s\x00-\x1f\x7f]/.test(url)) return null;
    return /^(?:https?:\/\/[^/]|mailto:[^/])/i.test(url) ? url : null;
  }

  function fenceOf(line: string) {
    const m = FENCE.exec(line);
    if (m === null || (m[2][0] === "`" && m[3].includes("`"))) return null;
    return { indent: m[1].length, marker: m[2], info: m[3].trim() };
  }

  /** Whether `line` ends a paragraph: an ordered item only when it is numbered 1 ("1999. x" is text). */
  function startsBlock(line: string, next: string | undefined): boolean {
    const item = ITEM.exec(line);
    return fenceOf(line) !== null || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
      item !== null && !isBlank(item[4] ?? "") && (!/\d/.test(item[2]) || /^1\D/.test(item[2])) ||
      line.includes("|") && next !== undefined && next.includes("-") && TABLE_DELIMITER.test(next);
  }

  function cells(line: string): string[] {
    let s = line.trim();
    if (s.startsWith("|")) s = s.slice(1);
    if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
    const out: string[] = [];
    let cell = "";
    for (let i = 0; i < s.length; i++) {
      if (s[i] === "\\" && s[i + 1] === "|") {
        cell += "|";
        i++;
      } else if (s[i] === "|") {
        out.push(cell.trim());
        cell = "";
      } else cell += s[i];
    }
    out.push(cell.trim());
    return out;
  }

  function blocks(lines: string[], depth: number): MdBlock[] {
    const out: MdBlock[] = [];
    if (depth > MAX_DEPTH) {
      const text = lines.join("\n").trim();
      return text === "" ? out : [{ type: "paragraph", children: [{ type: "text", text }] }];
    }
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (isBlank(line)) {
        i++;
        continue;
      }
      const fence = fenceOf(line);
      if (fence !== null) {
        const body: string[] = [];
        let open = true;
        for (i++; i < lines.length; i++) {
          const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
          if (
            close !== null && close[1][0] === fence.marker[0] &&
            close[1].length >= fence.marker.length
          ) {
            open = false;
            i++;
            break;
          }
          body.push(dedent(lines[i], fence.indent));
        }
        const lang = fence.info.split(/\s/)[0];
        out.push({
          type: "code",
          lang: /^[\w+#.-]{1,32}$/.test(lang) ? lang : "",
          text: body.join("\n"),
          open,
        });
        continue;
      }
      const heading = HEADING.exec(line);
      if (heading !== null) {
        out.push({
          type: "heading",
          level: heading[1].length,
          children: inline(heading[2] ?? "", depth),
        });
        i++;
        continue;
      }
      if (RULE.test(line)) {
        out.push({ type: "rule" });
        i++;
        continue;
      }
      if (QUOTE.test(line)) {
        const inner: string[] = [];
        for (; i < lines.length && QUOTE.test(lines[i]); i++) inner.push(QUOTE.exec(lines[i])![1]);
        out.push({ type: "quote", children: blocks(inner, depth + 1) });
        continue;
      }
      const item = ITEM.exec(line);
      if (item !== null && (item[4] !== undefined || i + 1 >= lines.length)) {
        const ordered = /\d/.test(item[2]);
        const items: MdBlock[][] = [];
        const start = ordered ? Number(item[2].slice(0, -1)) : 1;
        while (i < lines.length) {
          const m = ITEM.exec(lines[i]);
          if (m === null || /\d/.test(m[2]) !== ordered) break;
          const markerIndent = m[1].length;
          const contentIndent = markerIndent + m[2].length + Math.min((m[3] ?? " ").length, 4);
          const content = [m[4] ?? ""];
          for (i++; i < lines.length; i++) {
            const next = lines[i];
            if (isBlank(next)) {
              // A blank line continues the item when an indented line follows it.
              let j = i;
              while (j < lines.length && isBlank(lines[j])) j++;
              if (j < lines.length && indentOf(lines[j]) > markerIndent) {
                for (; i < j; i++) content.push("");
                i--;
                continue;
              }
              break;
            }
            if (indentOf(next) > markerIndent) content.push(dedent(next, contentIndent));
            else break;
          }
          items.push(blocks(content, depth + 1));
          // Blank lines between items of one list.
          let j = i;
          while (j < lines.length && isBlank(lines[j])) j++;
          const following = j < lines.length ? ITEM.exec(lines[j]) : null;
          if (following === null || /\d/.test(following[2]) !== ordered) break;
          i = j;
        }
        out.push({ type: "list", ordered, start, items });
        continue;
      }
      if (
        line.includes("|") && i + 1 < lines.length && TABLE_DELIMITER.test(lines[i + 1]) &&
        lines[i + 1].includes("-")
      ) {
        const head = cells(line);
        const align = cells(lines[i + 1]).map((c) =>
          c.startsWith(":") && c.endsWith(":")
            ? "center"
            : c.endsWith(":")
            ? "right"
            : c.startsWith(":")
            ? "left"
            : ""
        );
        if (align.length === head.length) {
          const rows: MdInline[][][] = [];
          for (i += 2; i < lines.length && !isBlank(lines[i]) && lines[i].includes("|"); i++) {
            const row = cells(lines[i]);
            rows.push(head.map((_, k) => inline(row[k] ?? "", depth)));
          }
          out.push({
            type: "table",
            align: align as ("left" | "center" | "right" | "")[],
            head: head.map((c) => inline(c, depth)),
            rows,
          });
          continue;
        }
      }
      const paragraph = [line.trim()];
      for (i++; i < lines.length; i++) {
        if (isBlank(lines[i]) || startsBlock(lines[i], lines[i + 1])) break;
        paragraph.push(lines[i].trim());
      }
      out.push({ type: "paragraph", children: inline(paragraph.join("\n"), depth) });
    }
    return out;
  }

  /** Where the closing `delimiter` of a run opened at `from` is, or -1. */
  function closing(s: string, delimiter: string, from: number): number {
    const c = delimiter[0], n = delimiter.length;
    for (let j = s.indexOf(delimiter, from); j >= 0; j = s.indexOf(delimiter, j + 1)) {
      if (/\s/.test(s[j - 1]) || s[j - 1] === "\\") continue;
      if (s[j + n] === c || (n === 1 && s[j - 1] === c)) continue;
      if (c === "_" && WORD.test(s[j + n] ?? "")) continue;
      return j;
    }
    return -1;
  }

  function inline(s: string, depth: number): MdInline[] {
    const out: MdInline[] = [];
    if (depth > MAX_DEPTH) return s === "" ? out : [{ type: "text", text: s }];
    // Where each delimiter's search ended: a search that found nothing from some position
    // finds nothing from any later one, and one that found a closer finds the same one from
    // anywhere up to it. Unclosed runs then cost one scan each kind, not one each.
    const none = new Map<string, number>();
    const found = new Map<string, [number, number]>();
    const find = (delimiter: string, from: number, search: () => number) => {
      const failed = none.get(delimiter);
      if (failed !== undefined && from >= failed) return -1;
      const last = found.get(delimiter);
      if (last !== undefined && from >= last[0] && from <= last[1]) return last[1];
      const at = search();
      if (at < 0) none.set(delimiter, Math.min(from, failed ?? Infinity));
      else found.set(delimiter, [from, at]);
      return at;
    };
    let brackets: Map<number, number> | undefined; // each [ to its ], found once
    let text = "";
    const flush = () => {
      if (text !== "") out.push({ type: "text", text });
      text = "";
    };
    let i = 0;
    while (i < s.length) {
      const c = s[i];
      if (c === "\\" && i + 1 < s.length && PUNCTUATION.test(s[i + 1])) {
        text += s[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        flush();
        out.push({ type: "break" });
        i++;
        continue;
      }
      if (c === "`") {
        let n = 1;
        while (s[i + n] === "`") n++;
        const ticks = "`".repeat(n);
        const end = find(ticks, i + n, () => {
          for (let j = s.indexOf(ticks, i + n); j >= 0; j = s.indexOf(ticks, j)) {
            if (s[j + n] !== "`") return j;
            while (s[j] === "`") j++;
          }
          return -1;
        });
        if (end < 0) {
          text += ticks;
          i += n;
          continue;
        }
        let code = s.slice(i + n, end).replace(/\n/g, " ");
        if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
        flush();
        out.push({ type: "code", text: code });
        i = end + n;
        continue;
      }
      if (c === "[") {
        // [label](target): the label's brackets balanced, the target's parentheses too.
        if (brackets === undefined) {
          brackets = new Map();
          const open: number[] = [];
          for (let k = 0; k < s.length; k++) {
            if (s[k] === "\\") k++;
            else if (s[k] === "[") open.push(k);
            else if (s[k] === "]" && open.length > 0) brackets.set(open.pop()!, k);
          }
        }
        const j = (brackets.get(i) ?? -2) + 1;
        if (j > 0 && s[j] === "(") {
          let k = j + 1, parens = 1;
          for (; k < Math.min(s.length, j + 2048) && parens > 0; k++) { // a longer target is text
            if (s[k] === "(") parens++;
            else if (s[k] === ")") parens--;
            else if (s[k] === "\n") break;
          }
          if (parens === 0) {
            const label = inline(s.slice(i + 1, j - 1), depth + 1);
            const target = s.slice(j + 1, k - 1).trim().replace(/\s+"[^"]*"$/, "");
            const href = safeHref(target);
            flush();
            if (href !== null) out.push({ type: "link", href, children: label });
            else out.push(...label);
            i = k;
            continue;
          }
        }
      }
      if (c === "<" || c === "h" || c === "m") {
        const prev = s[i - 1] ?? "";
        const auto = c === "<"
          ? /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/i.exec(s.slice(i, i + 2048))
          : WORD.test(prev)
          ? null
          : /^(?:https?:\/\/[^\s<>]*[^\s<>.,:;"'!?)\]*_~]|mailto:[^\s<>]*[^\s<>.,:;"'!?)\]])/i
            .exec(s.slice(i, i + 2048));
        const url = auto === null ? null : safeHref(auto[1] ?? auto[0]);
        if (auto !== null && url !== null) {
          flush();
          out.push({ type: "link", href: url, children: [{ type: "text", text: url }] });
          i += auto[0].length;
          continue;
        }
      }
      if (c === "*" || c === "_" || c === "~") {
        let n = 1;
        while (s[i + n] === c) n++;
        const next = s[i + n] ?? "";
        const opens = next !== "" && !/\s/.test(next) &&
          (c !== "_" || !WORD.test(s[i - 1] ?? ""));
        let done = false;
        if (opens) {
          for (const d of c === "~" ? [2] : n >= 2 ? [2, 1] : [1]) {
            if (d > n) continue;
            const delimiter = c.repeat(d);
            const from = i + d + 1;
            const end = find(delimiter, from, () => closing(s, delimiter, from));
            if (end < 0) continue;
            flush();
            out.push({
              type: c === "~" ? "del" : d === 2 ? "strong" : "em",
              // A longer run's surplus opens inside: ***a*** is strong(em(a)).
              children: inline(s.slice(i + d, end), depth + 1),
            });
            i = end + d;
            done = true;
            break;
          }
        }
        if (!done) {
          text += c.repeat(n);
          i += n;
        }
        continue;
      }
      text += c;
      i++;
    }
    flush();
    return out;
  }

  return blocks(source.replace(/\r\n?/g, "\n").split("\n"), 0);
}

/** {@linkcode parseMarkdown}'s source text, as the page embeds it. */
export const MARKDOWN_SOURCE: string = parseMarkdown.toString();

/**
 * Pre-tokenization for byte-level BPE: the text is cut into words by a list
 * of regexes applied one after the other, each inside the pieces the previous
 * one left (text between matches stays a piece too). The table follows
 * llama.cpp's per-`tokenizer.ggml.pre` lists, and so does the matching:
 *
 * - the GPT-2 and Llama 3 patterns run as hand-written splitters;
 * - a pattern using `\p{..}` runs on a "collapsed" text where every non-ASCII
 *   code point becomes one stand-in character for its category (whitespace
 *   becomes `\v`), exactly as llama.cpp does it, quirks included (for example
 *   `~` is not in `\p{S}` there);
 * - other patterns run on the code points with non-ASCII whitespace replaced
 *   by `\v`, where `\s` is ASCII whitespace only.
 *
 * @module
 */
import { codePoints, CP, cpFlags } from "./unicode.ts";

/** One step of a pre-tokenizer. */
export type PreStep =
  | { readonly kind: "gpt2" }
  | { readonly kind: "llama3" }
  | { readonly kind: "regex"; readonly source: string };

/** What a `tokenizer.ggml.pre` value selects. */
export interface PreTokenizer {
  readonly name: string;
  readonly steps: readonly PreStep[];
  /** Whole words found in the vocabulary skip the merges (Llama 3, Tekken). */
  readonly ignoreMerges: boolean;
  /** llama.cpp's `clean_spaces` for decoding. */
  readonly cleanSpaces: boolean;
  /** Forces `add_bos` on (overridable by `tokenizer.ggml.add_bos_token`). */
  readonly addBos: boolean;
  /** chatglm-bpe has no BOS. */
  readonly noBos: boolean;
}

const GPT2: PreStep = { kind: "gpt2" };
const LLAMA3: PreStep = { kind: "llama3" };
const re = (source: string): PreStep => ({ kind: "regex", source });

const QWEN2_RE = String
  .raw`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const PORO_RE = " ?[^(\\s|.,!?\\u2026\\u3002\\uFF0C\\u3001\\u0964\\u06D4\\u060C)]+";
/** deepseek-llm's letter class, as in llama.cpp (escaped: some are not NFC). */
const DEEPSEEK_LLM_LETTERS =
  "A-Za-z\\u00B5\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u01BA\\u01BC-\\u01BF\\u01C4-\\u0293\\u0295-\\u02AF\\u0370-\\u0373\\u0376\\u0377\\u037B-\\u037D\\u037F\\u0386\\u0388-\\u038A\\u038C\\u038E-\\u03A1\\u03A3-\\u03F5\\u03F7-\\u0481\\u048A-\\u052F\\u0531-\\u0556\\u10A0-\\u10C5\\u13A0-\\u13F5\\u13F8-\\u13FD\\u1C90-\\u1CBA\\u1CBD-\\u1CBF\\u1D00-\\u1D2B\\u1D6B-\\u1D77\\u1D79-\\u1D9A\\u1E00-\\u1F15\\u1F18-\\u1F1D\\u1F20-\\u1F45\\u1F48-\\u1F4D\\u1F50-\\u1F57\\u1F59\\u1F5B\\u1F5D\\u1F5F-\\u1F7D\\u1F80-\\u1FB4\\u1FB6-\\u1FBC\\u1FBE\\u1FC2-\\u1FC4\\u1FC6-\\u1FCC\\u1FD0-\\u1FD3\\u1FD6-\\u1FDB\\u1FE0-\\u1FEC\\u1FF2-\\u1FF4\\u1FF6-\\u1FFC\\u2102\\u2107\\u210A-\\u2113\\u2115\\u2119-\\u211D\\u2124\\u2126\\u2128\\u212A-\\u212D\\u212F-\\u2134\\u2139\\u213C-\\u213F\\u2145-\\u2149\\u214E\\u2183\\u2184\\u2C00-\\u2C7B\\u2C7E-\\u2CE4\\u2CEB-\\u2CEE\\u2CF2\\u2CF3\\uA640-\\uA66D\\uA680-\\uA69B\\uA722-\\uA76F\\uA771-\\uA787\\uA78B-\\uA78E\\uAB70-\\uABBF\\uFB00-\\uFB06\\uFB13-\\uFB17\\uFF21-\\uFF3A\\uFF41-\\uFF5A\\u{10400}-\\u{1044F}\\u{104B0}-\\u{104D3}\\u{104D8}-\\u{104FB}\\u{10C80}-\\u{10CB2}\\u{10CC0}-\\u{10CF2}\\u{118A0}-\\u{118DF}\\u{1E900}-\\u{1E943}";

type Flags = Partial<Omit<PreTokenizer, "name" | "steps">>;
const STARCODER_STEPS = [re(String.raw`\p{N}`), GPT2];
const GPT2_STEPS = [GPT2];
const QWEN2_STEPS = [re(QWEN2_RE)];
const DEFAULT_STEPS = [
  re(String.raw`[\p{P}\$\+<=>\^~\|]+`),
  GPT2,
  re(String.raw`\p{N}+`),
  re("[0-9][0-9][0-9]"),
];

/** Every known `tokenizer.ggml.pre` value: steps and flags (llama.cpp's table). */
const TABLE: ReadonlyArray<[readonly string[], readonly PreStep[], Flags]> = [
  [["default"], DEFAULT_STEPS, {}],
  [["llama3", "llama-v3", "llama-bpe", "falcon3"], [LLAMA3], {
    ignoreMerges: true,
    addBos: true,
  }],
  [["dbrx", "smaug-bpe"], [LLAMA3], {}],
  [["deepseek-llm"], [
    re("[\\r\\n]"),
    re(String.raw`\s?[${DEEPSEEK_LLM_LETTERS}]+`),
    re("\\s?[!-/:-~\\uFF01-\\uFF0F\\uFF1A-\\uFF5E\\u2018-\\u201F\\u3000-\\u3002]+"),
    re(String.raw`\s+$`),
    re("[\\u4E00-\\u9FA5\\u0800-\\u4E00\\uAC00-\\uD7FF]+"),
    re(String.raw`\p{N}+`),
  ], { cleanSpaces: false }],
  [["deepseek-v3"], [
    re(String.raw`\p{N}{1,3}`),
    re("[\\u4E00-\\u9FA5\\u3040-\\u309F\\u30A0-\\u30FF]+"),
    re(
      String
        .raw`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_${"`"}{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
    ),
  ], { cleanSpaces: false }],
  [["deepseek-coder"], [
    re("[\\r\\n]"),
    re(String.raw`\s?\p{L}+`),
    re(String.raw`\s?\p{P}+`),
    re("[\\u4E00-\\u9FA5\\u0800-\\u4E00\\uAC00-\\uD7FF]+"),
    re(String.raw`\p{N}`),
  ], { cleanSpaces: false }],
  [["falcon"], [re(String.raw`[\p{P}\$\+<=>\^~\|${"`"}]+`), GPT2, re("[0-9][0-9][0-9]")], {}],
  [["starcoder", "refact", "codeshell", "exaone", "minerva-7b"], STARCODER_STEPS, {}],
  [["command-r", "smollm"], STARCODER_STEPS, { cleanSpaces: false }],
  [
    [
      "gpt-2",
      "phi-2",
      "jina-es",
      "jina-de",
      "gigachat",
      "jina-v1-en",
      "jina-v2-es",
      "jina-v2-de",
      "jina-v2-code",
      "roberta-bpe",
      "mpt",
      "olmo",
      "jais",
    ],
    GPT2_STEPS,
    {},
  ],
  [["qwen2", "deepseek-r1-qwen"], QWEN2_STEPS, { cleanSpaces: false }],
  [["stablelm2", "megrez"], QWEN2_STEPS, {}],
  [["poro-chat"], [re(PORO_RE)], { cleanSpaces: false }],
  [["bloom", "gpt3-finnish"], [re(PORO_RE)], {}],
  [["chatglm-bpe"], [LLAMA3], { noBos: true }],
  [["viking"], [re(PORO_RE), re(String.raw`\p{N}`)], { cleanSpaces: false }],
  [["tekken"], [
    re(
      String
        .raw`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
    ),
  ], { cleanSpaces: false, ignoreMerges: true, addBos: true }],
  // newer llama.cpp (after the vectors' commit); no vectors here to check it against
  [["gpt-4o", "llama4"], [
    re(
      String
        .raw`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
    ),
  ], { cleanSpaces: false }],
  [["chameleon"], [
    re("<sentinel:[0-9]+>"),
    re("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"),
    re("([\\t\\n]|    |  )"),
    re(String.raw`\p{N}`),
    re(String.raw`[\p{P}!-/:-@\[-${"`"}{-~]`),
    GPT2,
  ], { cleanSpaces: false, addBos: true }],
];

const BY_NAME: ReadonlyMap<string, PreTokenizer> = new Map(
  TABLE.flatMap(([names, steps, flags]) =>
    names.map((name): [string, PreTokenizer] => [name, {
      name,
      steps,
      ignoreMerges: flags.ignoreMerges ?? false,
      cleanSpaces: flags.cleanSpaces ?? true,
      addBos: flags.addBos ?? false,
      noBos: flags.noBos ?? false,
    }])
  ),
);

/** The pre-tokenizer for a `tokenizer.ggml.pre` value, or undefined if unknown. */
export function preTokenizer(name: string): PreTokenizer | undefined {
  return BY_NAME.get(name);
}

// --- regex translation -----------------------------------------------------

/** Stand-in characters of the collapsed text, by category. */
const COLLAPSED = { other: 0xd0, N: 0xd1, L: 0xd2, P: 0xd3, M: 0xd4, S: 0xd5 } as const;
/** What `\p{X}` becomes on collapsed text: the stand-in plus the ASCII members. */
const COLLAPSED_CLASS: Record<string, string> = {
  N: "\\xD10-9",
  L: "\\xD2A-Za-z",
  P: "\\xD3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}",
  M: "\\xD4",
  S: "\\xD5\\$\\+<->\\^`\\|",
};
const ASCII_SPACE = "\\t\\n\\v\\f\\r ";

/** Rewrites a pattern for the collapsed or the code point text. */
function translate(source: string, collapsed: boolean): string {
  let out = "";
  let inside = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\") {
      const next = source[i + 1];
      if (next === "p" && source[i + 2] === "{" && source[i + 4] === "}") {
        const cls = COLLAPSED_CLASS[source[i + 3]];
        if (cls === undefined || !collapsed) {
          throw new Error(`unsupported category ${source.slice(i, i + 5)}`);
        }
        out += inside ? cls : `[${cls}]`;
        i += 4;
      } else if (!collapsed && next === "s") {
        out += inside ? ASCII_SPACE : `[${ASCII_SPACE}]`;
        i++;
      } else if (!collapsed && next === "S") {
        if (inside) throw new Error("\\S inside a class is not supported");
        out += `[^${ASCII_SPACE}]`;
        i++;
      } else {
        out += c + next;
        i++;
      }
      continue;
    }
    if (c === "[" && !inside) inside = true;
    else if (c === "]" && inside) inside = false;
    out += c;
  }
  return out;
}

const compiled = new Map<string, RegExp>();

function regexFor(source: string, collapsed: boolean): RegExp {
  const key = (collapsed ? "c" : "w") + source;
  let r = compiled.get(key);
  if (r === undefined) {
    r = new RegExp(translate(source, collapsed), collapsed ? "g" : "gu");
    compiled.set(key, r);
  }
  return r;
}

// --- splitting ---------------------------------------------------------------

/** The text being split: code points and lazily built views of them. */
class SplitText {
  readonly cps: Uint32Array;
  #collapsed?: string;
  #wide?: { text: string; cpAt16: Int32Array };

  constructor(cps: Uint32Array) {
    this.cps = cps;
  }

  /** One char per code point: ASCII as is, whitespace `\v`, else a category stand-in. */
  get collapsed(): string {
    if (this.#collapsed !== undefined) return this.#collapsed;
    const codes = new Uint16Array(this.cps.length);
    for (let i = 0; i < this.cps.length; i++) {
      const cp = this.cps[i];
      if (cp < 128) {
        codes[i] = cp;
        continue;
      }
      const f = cpFlags(cp);
      codes[i] = f & CP.WHITESPACE
        ? 0x0b
        : f & CP.NUMBER
        ? COLLAPSED.N
        : f & CP.LETTER
        ? COLLAPSED.L
        : f & CP.PUNCTUATION
        ? COLLAPSED.P
        : f & CP.MARK
        ? COLLAPSED.M
        : f & CP.SYMBOL
        ? COLLAPSED.S
        : COLLAPSED.other;
    }
    this.#collapsed = fromCharCodes(codes);
    return this.#collapsed;
  }

  /** The code points as a string with non-ASCII whitespace as `\v`. */
  get wide(): { text: string; cpAt16: Int32Array } {
    if (this.#wide !== undefined) return this.#wide;
    let text = "";
    const parts: string[] = [];
    const cpAt16: number[] = [];
    for (let i = 0; i < this.cps.length; i++) {
      let cp = this.cps[i];
      if (cp > 0x7f && cpFlags(cp) & CP.WHITESPACE) cp = 0x0b;
      const s = String.fromCodePoint(cp);
      parts.push(s);
      cpAt16.push(i);
      if (s.length === 2) cpAt16.push(i);
    }
    cpAt16.push(this.cps.length);
    text = parts.join("");
    this.#wide = { text, cpAt16: Int32Array.from(cpAt16) };
    return this.#wide;
  }
}

function fromCharCodes(codes: Uint16Array): string {
  let s = "";
  const chunk = 8192;
  for (let i = 0; i < codes.length; i += chunk) {
    s += String.fromCharCode(...codes.subarray(i, i + chunk));
  }
  return s;
}

/** Applies a regex inside each piece; returns the new piece lengths (code points). */
function splitRegex(t: SplitText, source: string, offsets: number[]): number[] {
  const collapsed = source.includes("\\p{");
  const regex = regexFor(source, collapsed);
  const out: number[] = [];
  let start = 0;
  if (collapsed) {
    const text = t.collapsed;
    for (const len of offsets) {
      const piece = text.slice(start, start + len);
      regex.lastIndex = 0;
      let prev = 0;
      for (let m = regex.exec(piece); m !== null; m = regex.exec(piece)) {
        if (m[0].length === 0) {
          regex.lastIndex++;
          continue;
        }
        if (m.index > prev) out.push(m.index - prev);
        out.push(m[0].length);
        prev = m.index + m[0].length;
      }
      if (prev < len) out.push(len - prev);
      start += len;
    }
    return out;
  }
  const { text, cpAt16 } = t.wide;
  // UTF-16 start of each code point piece
  let start16 = 0;
  for (const len of offsets) {
    let end16 = start16;
    // advance end16 over len code points
    let cpEnd = start + len;
    while (end16 < text.length && cpAt16[end16] < cpEnd) end16++;
    const piece = text.slice(start16, end16);
    regex.lastIndex = 0;
    let prev = start;
    for (let m = regex.exec(piece); m !== null; m = regex.exec(piece)) {
      if (m[0].length === 0) {
        regex.lastIndex++;
        continue;
      }
      const a = cpAt16[start16 + m.index];
      const b = cpAt16[start16 + m.index + m[0].length];
      if (a > prev) out.push(a - prev);
      out.push(b - a);
      prev = b;
    }
    cpEnd = start + len;
    if (prev < cpEnd) out.push(cpEnd - prev);
    start = cpEnd;
    start16 = end16;
  }
  return out;
}

const OUT = -1;

/** GPT-2's pattern, by hand: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` */
function splitGpt2(cps: Uint32Array, offsets: number[]): number[] {
  const out: number[] = [];
  let start = 0;
  for (const len of offsets) {
    const ini = start;
    const end = start + len;
    start = end;
    const cpAt = (p: number) => (p >= ini && p < end ? cps[p] : OUT);
    // class bits, with 256 = "inside the piece" (llama.cpp's non-zero flags)
    const fl = (p: number) => (p >= ini && p < end ? cpFlags(cps[p]) | 256 : 0);
    let prevEnd = ini;
    const add = (e: number) => {
      const n = e - prevEnd;
      if (n > 0) out.push(n);
      prevEnd = e;
      return n;
    };
    for (let pos = ini; pos < end;) {
      const cp = cpAt(pos);
      if (cp === 0x27 && pos + 1 < end) {
        const n1 = cpAt(pos + 1);
        if (n1 === 0x73 || n1 === 0x74 || n1 === 0x6d || n1 === 0x64) { // s t m d
          pos += add(pos + 2);
          continue;
        }
        if (pos + 2 < end) {
          const n2 = cpAt(pos + 2);
          if (
            (n1 === 0x72 && n2 === 0x65) || (n1 === 0x76 && n2 === 0x65) ||
            (n1 === 0x6c && n2 === 0x6c)
          ) { // re ve ll
            pos += add(pos + 3);
            continue;
          }
        }
      }
      let f2 = cp === 0x20 ? fl(pos + 1) : fl(pos);
      if (f2 & CP.LETTER) {
        if (cp === 0x20) pos++;
        while (f2 & CP.LETTER) f2 = fl(++pos);
        add(pos);
        continue;
      }
      if (f2 & CP.NUMBER) {
        if (cp === 0x20) pos++;
        while (f2 & CP.NUMBER) f2 = fl(++pos);
        add(pos);
        continue;
      }
      const other = (f: number) => !(f & (CP.WHITESPACE | CP.LETTER | CP.NUMBER)) && f !== 0;
      if (other(f2)) {
        if (cp === 0x20) pos++;
        while (other(f2)) f2 = fl(++pos);
        add(pos);
        continue;
      }
      let ws = 0;
      while (fl(pos + ws) & CP.WHITESPACE) ws++;
      if (ws > 1 && cpAt(pos + ws) !== OUT) {
        pos += ws - 1;
        add(pos);
        continue;
      }
      if (ws > 0) {
        pos += ws;
        add(pos);
        continue;
      }
      add(++pos);
    }
  }
  return out;
}

const lowerAscii = (cp: number) => (cp >= 0x41 && cp <= 0x5a ? cp + 32 : cp);

/** Llama 3's pattern, by hand: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+` */
function splitLlama3(cps: Uint32Array, offsets: number[]): number[] {
  const out: number[] = [];
  let start = 0;
  for (const len of offsets) {
    const ini = start;
    const end = start + len;
    start = end;
    const cpAt = (p: number) => (p >= ini && p < end ? cps[p] : OUT);
    const fl = (p: number) => (p >= ini && p < end ? cpFlags(cps[p]) | 256 : 0);
    let prevEnd = ini;
    const add = (e: number) => {
      const n = e - prevEnd;
      if (n > 0) out.push(n);
      prevEnd = e;
      return n;
    };
    for (let pos = ini; pos < end;) {
      const cp = cpAt(pos);
      const f = fl(pos);
      if (cp === 0x27 && pos + 1 < end) {
        const n1 = lowerAscii(cpAt(pos + 1));
        if (n1 === 0x73 || n1 === 0x74 || n1 === 0x6d || n1 === 0x64) {
          pos += add(pos + 2);
          continue;
        }
        if (pos + 2 < end) {
          const n2 = lowerAscii(cpAt(pos + 2));
          if (
            (n1 === 0x72 && n2 === 0x65) || (n1 === 0x76 && n2 === 0x65) ||
            (n1 === 0x6c && n2 === 0x6c)
          ) {
            pos += add(pos + 3);
            continue;
          }
        }
      }
      if (!(cp === 0x0d || cp === 0x0a || f & CP.NUMBER)) {
        if (f & CP.LETTER || fl(pos + 1) & CP.LETTER) {
          pos++;
          while (fl(pos) & CP.LETTER) pos++;
          add(pos);
          continue;
        }
      }
      if (f & CP.NUMBER) {
        let first = pos;
        while (fl(pos) & CP.NUMBER) {
          if (++pos - first >= 3) {
            add(pos);
            first = pos;
          }
        }
        add(pos);
        continue;
      }
      let f2 = cp === 0x20 ? fl(pos + 1) : f;
      const other = (x: number) => !(x & (CP.WHITESPACE | CP.LETTER | CP.NUMBER));
      if (other(f2) && f !== 0) {
        if (cp === 0x20) pos++;
        while (other(f2) && f2 !== 0) f2 = fl(++pos);
        let c2 = cpAt(pos);
        while (c2 === 0x0d || c2 === 0x0a) c2 = cpAt(++pos);
        add(pos);
        continue;
      }
      let ws = 0;
      let lastNl = 0;
      while (fl(pos + ws) & CP.WHITESPACE) {
        const c2 = cpAt(pos + ws);
        if (c2 === 0x0d || c2 === 0x0a) lastNl = pos + ws + 1;
        ws++;
      }
      if (lastNl > 0) {
        pos = lastNl;
        add(pos);
        continue;
      }
      if (ws > 1 && cpAt(pos + ws) !== OUT) {
        pos += ws - 1;
        add(pos);
        continue;
      }
      if (ws > 0) {
        pos += ws;
        add(pos);
        continue;
      }
      add(++pos);
    }
  }
  return out;
}

/**
 * Cuts `text` into words with the steps of a pre-tokenizer. `text` must be
 * well-formed (no lone surrogates). The words, joined, give back `text`.
 */
export function preSplit(text: string, steps: readonly PreStep[]): string[] {
  if (text.length === 0) return [];
  const cps = codePoints(text);
  const t = new SplitText(cps);
  let offsets = [cps.length];
  for (const step of steps) {
    if (step.kind === "gpt2") offsets = splitGpt2(cps, offsets);
    else if (step.kind === "llama3") offsets = splitLlama3(cps, offsets);
    else offsets = splitRegex(t, step.source, offsets);
  }
  const words: string[] = new Array(offsets.length);
  let i16 = 0;
  let cp = 0;
  for (let w = 0; w < offsets.length; w++) {
    const from = i16;
    const stop = cp + offsets[w];
    while (cp < stop) {
      i16 += cps[cp] > 0xffff ? 2 : 1;
      cp++;
    }
    words[w] = text.slice(from, i16);
  }
  return words;
}

/** Seeded random Unicode strings for the tokenizer fuzz tests. @module */

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const POOLS: readonly string[][] = [
  [
    "the",
    "The",
    " quick",
    "brown",
    "fox",
    "Hello",
    "world",
    "don't",
    "I'LL",
    "we're",
    "it's",
    "'s",
    "'d",
  ],
  ["0", "7", "12", "123", "4567", "3.14", "1,000", "½", "²", "٣", "Ⅻ"],
  [
    ".",
    ",",
    "!",
    "?",
    ";",
    ":",
    "-",
    "--",
    "...",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "/",
    "\\",
    "'",
    '"',
    "`",
    "~",
    "@",
    "#",
    "$",
    "%",
    "^",
    "&",
    "*",
    "_",
    "+",
    "=",
    "|",
  ],
  [
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    " \n ",
    "\u00a0",
    "\u3000",
    "\u2009",
    "\u0085",
    "\u2028",
    "\v",
    "\f",
  ],
  ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️", "🦙", "∑", "∞", "→", "€", "©", "™"],
  ["你好", "世界", "中文", "한국어", "日本語", "ひらがな", "カタカナ", "漢字"],
  ["שלום", "مرحبا", "עברית", "العربية", "\u200f", "\u200e"],
  ["e\u0301", "a\u0308", "\u0301", "n\u0303", "o\u0302\u0323", "\u0915\u094d\u0937", "ñ", "ö"],
  ["\u0000", "\u0001", "\u001b", "\u007f", "\u0080", "\u009f", "\u200b", "\ufeff", "\ufffd"],
  ["Ελληνικά", "Русский", "हिन्दी", "ไทย", "Tiếng Việt", "ǅ", "ß", "ﬁ", "Ａｂｃ"],
  ["<s>", "</s>", "<|im_end|>", "<|eot_id|>", "<think>", "[PAD]", "<unk>", "<0x41>", "▁", "Ġ"],
];

function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)];
}

/** One random string: pieces from the pools, sometimes a long run of one character. */
export function randomText(rand: () => number): string {
  const r = rand();
  if (r < 0.05) return "";
  if (r < 0.12) {
    const ch = pick(rand, ["a", " ", "1", "\n", "é", "中", "😀", "!", "\t", "ab"]);
    return ch.repeat(1 + Math.floor(rand() * 300));
  }
  const parts: string[] = [];
  const n = 1 + Math.floor(rand() * 12);
  for (let i = 0; i < n; i++) {
    if (rand() < 0.03) {
      parts.push(String.fromCharCode(0xd800 + Math.floor(rand() * 0x800))); // lone surrogate
      continue;
    }
    if (rand() < 0.1) {
      // any code point
      let cp = Math.floor(rand() * 0x30000);
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41;
      parts.push(String.fromCodePoint(cp));
      continue;
    }
    parts.push(pick(rand, pick(rand, POOLS)));
  }
  return parts.join("");
}

/** "ab", a cut 3-byte sequence, stray bytes, a cut 2-byte and 4-byte sequence, then "€!". */
export const INVALID_UTF8: Uint8Array = Uint8Array.of(
  ...[0x61, 0x62, 0xe2, 0x82, 0x20, 0x78, 0xff, 0xfe, 0x20, 0x79, 0xc3],
  ...[0x20, 0xf0, 0x9f, 0x98, 0x20, 0x7a, 0xe2, 0x82, 0xac, 0x21],
);

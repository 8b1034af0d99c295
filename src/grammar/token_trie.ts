/**
 * A vocabulary as the grammar matcher sees it: each token's bytes decoded to
 * code points the way llama.cpp's grammar decodes them (`decode_utf8` of
 * src/llama-grammar.cpp: a piece ends at its first NUL byte, a trailing
 * incomplete UTF-8 sequence is kept as a partial character, an invalid
 * sequence makes the token unusable), and a trie over those code points laid
 * out in preorder so that a mask is one forward pass that skips dead subtrees.
 *
 * Built once per tokenizer and shared by every grammar on it.
 *
 * @module
 */

/** What the trie needs from a tokenizer. */
export interface TrieTokenizer {
  readonly vocabSize: number;
  /** The bytes of one token, control tokens rendered (llama.cpp's `token_to_piece(special = true)`). */
  pieceBytes(id: number, special?: boolean): Uint8Array;
  isEog(id: number): boolean;
}

/** A token's kind for the grammar. */
export const enum TokenKind {
  /** Has code points (and maybe a trailing partial character). */
  TEXT = 0,
  /** Only the start of a character: no complete code point. */
  PARTIAL = 1,
  /** End of generation: allowed only where the grammar may end. */
  EOG = 2,
  /** Empty piece, a piece starting with NUL, or invalid UTF-8: never allowed. */
  NEVER = 3,
}

/** The UTF-8 state between tokens: `remain` bytes still expected (-1: invalid). */
export interface PartialUtf8 {
  value: number;
  remain: number;
}

const LOOKUP = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];

/**
 * llama.cpp's `decode_utf8(piece, partial_start)`: the complete code points
 * of `bytes` (up to the first NUL) after continuing `start`, and the partial
 * character left at the end. On an invalid sequence the code points are
 * whatever llama.cpp keeps (none) and `remain` is negative.
 */
export function decodeUtf8(bytes: Uint8Array, start: PartialUtf8, out: number[]): PartialUtf8 {
  out.length = 0;
  let i = 0;
  const n = bytes.length;
  let value = start.value;
  let remain = start.remain;
  while (i < n && bytes[i] !== 0 && remain > 0) {
    const b = bytes[i];
    if (b >> 6 !== 2) {
      out.length = 0;
      return { value: 0, remain: -1 };
    }
    value = (value << 6) + (b & 0x3f);
    i++;
    remain--;
  }
  if (start.remain > 0 && remain === 0) out.push(value);
  while (i < n && bytes[i] !== 0) {
    const first = bytes[i];
    remain = LOOKUP[first >> 4] - 1;
    if (remain < 0) {
      out.length = 0;
      return { value: 0, remain };
    }
    value = first & ((1 << (7 - remain)) - 1);
    i++;
    while (i < n && bytes[i] !== 0 && remain > 0) {
      value = (value << 6) + (bytes[i] & 0x3f);
      i++;
      remain--;
    }
    if (remain === 0) out.push(value);
  }
  return { value, remain };
}

/** The vocabulary decoded for grammars, with a preorder trie over code points. */
export class TokenTrie {
  readonly vocabSize: number;
  /** Each token's {@linkcode TokenKind}. */
  readonly kind: Uint8Array;
  /** Code points of token `t`: `cps[cpStart[t] .. cpStart[t + 1])`. */
  readonly cpStart: Int32Array;
  readonly cps: Int32Array;
  /** The partial character each token ends with (`partialRemain` 0: none). */
  readonly partialValue: Int32Array;
  readonly partialRemain: Int8Array;
  /** End-of-generation tokens. */
  readonly eog: Int32Array;
  /** Tokens whose first byte continues a character (the only ones allowed after a partial one). */
  readonly continuations: Int32Array;
  // The trie, in preorder; node 0 is the root (no code point).
  /** Code point on the edge into each node. */
  readonly nodeCp: Int32Array;
  /** Depth of each node (root 0). */
  readonly nodeDepth: Int32Array;
  /** Index just past each node's subtree. */
  readonly nodeEnd: Int32Array;
  /** Tokens that end at node n: `tokens[nodeTokens[2n] .. nodeTokens[2n + 1])`. */
  readonly nodeTokens: Int32Array;
  readonly tokens: Int32Array;
  readonly maxDepth: number;
  /**
   * The ASCII code points below each node (its own excluded), as 128 bits in
   * four words per node, and whether any code point below it is not ASCII:
   * a state that keeps itself on all of them accepts the whole subtree.
   */
  readonly belowAscii: Int32Array;
  readonly belowOther: Uint8Array;
  /** How many code points the deepest path below each node has. */
  readonly height: Int32Array;
  /** Tokens in `tokens` owned by nodes before node n in preorder (so a subtree's tokens are a range). */
  readonly tokensBefore: Int32Array;
  readonly #tokenizer: TrieTokenizer;
  readonly #pieces: (Uint8Array | undefined)[];

  constructor(tokenizer: TrieTokenizer) {
    const V = tokenizer.vocabSize;
    this.vocabSize = V;
    this.#tokenizer = tokenizer;
    this.#pieces = new Array(V);
    this.kind = new Uint8Array(V);
    this.partialValue = new Int32Array(V);
    this.partialRemain = new Int8Array(V);
    const cpStart = new Int32Array(V + 1);
    let capacity = 0;
    for (let t = 0; t < V; t++) capacity += tokenizer.pieceBytes(t, true).length;
    const all = new Int32Array(capacity); // a code point takes at least a byte
    let used = 0;
    const eog: number[] = [], continuations: number[] = [];
    const scratch: number[] = [];
    const zero: PartialUtf8 = { value: 0, remain: 0 };
    for (let t = 0; t < V; t++) {
      cpStart[t] = used;
      const piece = tokenizer.pieceBytes(t, true);
      if (tokenizer.isEog(t)) {
        this.kind[t] = TokenKind.EOG;
        eog.push(t);
        continue;
      }
      if (piece.length === 0 || piece[0] === 0) {
        this.kind[t] = TokenKind.NEVER;
        continue;
      }
      if (piece[0] >> 6 === 2) continuations.push(t);
      const p = decodeUtf8(piece, zero, scratch);
      if (p.remain < 0) {
        this.kind[t] = TokenKind.NEVER;
        continue;
      }
      this.kind[t] = scratch.length > 0 ? TokenKind.TEXT : TokenKind.PARTIAL;
      this.partialValue[t] = p.value;
      this.partialRemain[t] = p.remain;
      for (let i = 0; i < scratch.length; i++) all[used++] = scratch[i];
    }
    cpStart[V] = used;
    this.cpStart = cpStart;
    this.cps = all.slice(0, used);
    this.eog = Int32Array.from(eog);
    this.continuations = Int32Array.from(continuations);

    // Sort the usable tokens by the UTF-16 form of their code points: a prefix
    // sorts before its extensions and tokens sharing a prefix stay together,
    // as the trie needs.
    const order: number[] = [];
    const keys = new Array<string>(V);
    const cps = this.cps;
    for (let t = 0; t < V; t++) {
      if (this.kind[t] !== TokenKind.TEXT && this.kind[t] !== TokenKind.PARTIAL) continue;
      order.push(t);
      let key = "";
      for (let i = cpStart[t]; i < cpStart[t + 1]; i++) key += String.fromCodePoint(cps[i]);
      keys[t] = key;
    }
    order.sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : a - b));
    const maxNodes = used + 1;
    const nodeCp = new Int32Array(maxNodes), nodeDepth = new Int32Array(maxNodes);
    const nodeEnd = new Int32Array(maxNodes);
    // Tokens of one node are contiguous in `order`: node n owns order[first[n] .. last[n]).
    const first = new Int32Array(maxNodes), last = new Int32Array(maxNodes);
    let nodes = 1;
    const path: number[] = [0]; // path[d] = the node at depth d on the current token's path
    let prev = -1;
    let maxDepth = 0;
    for (let k = 0; k < order.length; k++) {
      const t = order[k];
      const start = cpStart[t], len = cpStart[t + 1] - start;
      let common = 0;
      if (prev >= 0) {
        const ps = cpStart[prev], plen = cpStart[prev + 1] - ps;
        while (common < len && common < plen && cps[start + common] === cps[ps + common]) common++;
      }
      while (path.length - 1 > common) nodeEnd[path.pop()!] = nodes;
      for (let d = common; d < len; d++) {
        path.push(nodes);
        nodeCp[nodes] = cps[start + d];
        nodeDepth[nodes] = d + 1;
        nodes++;
      }
      const node = path[len];
      if (first[node] === last[node]) first[node] = k;
      last[node] = k + 1;
      if (len > maxDepth) maxDepth = len;
      prev = t;
    }
    while (path.length > 0) nodeEnd[path.pop()!] = nodes;
    const ranges = new Int32Array(nodes * 2);
    for (let n = 0; n < nodes; n++) {
      ranges[2 * n] = first[n];
      ranges[2 * n + 1] = last[n];
    }
    this.nodeCp = nodeCp.slice(0, nodes);
    this.nodeDepth = nodeDepth.slice(0, nodes);
    this.nodeEnd = nodeEnd.slice(0, nodes);
    this.nodeTokens = ranges;
    this.tokens = Int32Array.from(order);
    this.maxDepth = maxDepth;
    // What lies below each node: children come after their parent in preorder,
    // so one backward pass folds each node into its parent.
    const parent = new Int32Array(nodes);
    {
      const stack: number[] = [0];
      for (let n = 1; n < nodes; n++) {
        while (nodeEnd[stack[stack.length - 1]] <= n) stack.pop();
        parent[n] = stack[stack.length - 1];
        stack.push(n);
      }
    }
    const belowAscii = new Int32Array(nodes * 4), belowOther = new Uint8Array(nodes);
    for (let n = nodes - 1; n >= 1; n--) {
      const p = parent[n], cp = nodeCp[n];
      for (let k = 0; k < 4; k++) belowAscii[4 * p + k] |= belowAscii[4 * n + k];
      if (cp < 128) belowAscii[4 * p + (cp >> 5)] |= 1 << (cp & 31);
      if (cp >= 128 || belowOther[n]) belowOther[p] = 1;
    }
    this.belowAscii = belowAscii;
    this.belowOther = belowOther;
    const height = new Int32Array(nodes);
    for (let n = nodes - 1; n >= 1; n--) {
      if (height[n] + 1 > height[parent[n]]) height[parent[n]] = height[n] + 1;
    }
    this.height = height;
    const tokensBefore = new Int32Array(nodes + 1);
    for (let n = 0; n < nodes; n++) tokensBefore[n + 1] = tokensBefore[n] + last[n] - first[n];
    this.tokensBefore = tokensBefore;
  }

  /** Number of trie nodes (the root included). */
  get nodeCount(): number {
    return this.nodeCp.length;
  }

  /** The piece of token `t` as the grammar reads it. */
  piece(t: number): Uint8Array {
    return this.#pieces[t] ??= this.#tokenizer.pieceBytes(t, true);
  }
}

const tries = new WeakMap<TrieTokenizer, TokenTrie>();

/** The trie of `tokenizer`, built on first use and kept while the tokenizer lives. */
export function tokenTrie(tokenizer: TrieTokenizer): TokenTrie {
  let trie = tries.get(tokenizer);
  if (trie === undefined) {
    trie = new TokenTrie(tokenizer);
    tries.set(tokenizer, trie);
  }
  return trie;
}

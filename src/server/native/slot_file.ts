/**
 * Slot files (`/slots/ID?action=save|restore`): what a slot's KV cache
 * holds, written so that a restore checks it before loading anything. The
 * layout: the magic line `DOTLLM-SLOT 1\n`, a u32 (little-endian) length
 * and a JSON header (`model`: the identity of the model and cache layout it
 * was saved from, `tokens`: how many, `layerBytes`: each layer's K then V
 * byte count), the token ids (i32), then the K/V rows. A file that is not
 * one, is cut short or longer than its header says, or comes from another
 * model or cache layout is refused with one line.
 *
 * @module
 */

const MAGIC = new TextEncoder().encode("DOTLLM-SLOT 1\n");

/** What a slot file holds. */
export interface SlotData {
  tokens: Int32Array;
  /** Per layer, K then V. */
  layers: Uint8Array[];
}

/** Encodes a slot file. */
export function encodeSlotFile(model: string, data: SlotData): Uint8Array {
  const header = new TextEncoder().encode(JSON.stringify({
    model,
    tokens: data.tokens.length,
    layerBytes: data.layers.map((l) => l.byteLength),
  }));
  const total = MAGIC.length + 4 + header.length + data.tokens.byteLength +
    data.layers.reduce((a, l) => a + l.byteLength, 0);
  const out = new Uint8Array(total);
  let at = 0;
  out.set(MAGIC, at);
  at += MAGIC.length;
  new DataView(out.buffer).setUint32(at, header.length, true);
  at += 4;
  out.set(header, at);
  at += header.length;
  out.set(new Uint8Array(data.tokens.buffer, data.tokens.byteOffset, data.tokens.byteLength), at);
  at += data.tokens.byteLength;
  for (const l of data.layers) {
    out.set(l, at);
    at += l.byteLength;
  }
  return out;
}

/**
 * Decodes a slot file saved from `model`, whose layers must have the sizes
 * `layerBytes(tokens)` gives; throws an `Error` with one line otherwise.
 */
export function decodeSlotFile(
  bytes: Uint8Array,
  model: string,
  layerBytes: (tokens: number) => number[],
): SlotData {
  if (bytes.length < MAGIC.length + 4 || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new Error("not a dotllm slot file");
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getUint32(MAGIC.length, true);
  const start = MAGIC.length + 4;
  if (start + headerLength > bytes.length) throw new Error("the slot file is truncated");
  let header: { model?: unknown; tokens?: unknown; layerBytes?: unknown };
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(start, start + headerLength)));
  } catch {
    throw new Error("the slot file's header is not valid JSON");
  }
  if (header.model !== model) {
    throw new Error(
      `the slot file was saved from another model or cache layout (${
        String(header.model).slice(0, 120)
      }), not ${model}`,
    );
  }
  const n = header.tokens;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0) {
    throw new Error("the slot file's header has no token count");
  }
  const want = layerBytes(n);
  const got = header.layerBytes;
  if (!Array.isArray(got) || got.length !== want.length || got.some((b, i) => b !== want[i])) {
    throw new Error("the slot file's K/V layout does not match this server's cache");
  }
  const expected = start + headerLength + 4 * n + want.reduce((a, b) => a + b, 0);
  if (bytes.length !== expected) {
    throw new Error(
      `the slot file is ${
        bytes.length < expected ? "truncated" : "longer than its header says"
      }: ${bytes.length} bytes, expected ${expected}`,
    );
  }
  let at = start + headerLength;
  // a copy: `bytes` may be a Node Buffer whose slice shares a larger, unaligned pool
  const tokens = new Int32Array(new Uint8Array(bytes.subarray(at, at + 4 * n)).buffer);
  at += 4 * n;
  const layers: Uint8Array[] = [];
  for (const b of want) {
    layers.push(bytes.subarray(at, at + b));
    at += b;
  }
  return { tokens, layers };
}

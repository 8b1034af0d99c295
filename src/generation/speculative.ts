/**
 * Speculative decoding: a {@linkcode Drafter} proposes the tokens that
 * likely follow a sequence, the step driver runs the sequence's next token
 * and the drafted ones in one batch, and the sequence steps through the
 * logits rows in order while its own sample equals the drafted token
 * (llama.cpp's rule). The first row whose sample differs gives the next
 * token; the rows after it are dropped and the KV cache is truncated back to
 * the tokens kept. The sequence, its sampler and its logit processors see
 * exactly the rows and tokens of a run without speculation, so the output is
 * the same token for token (greedy or sampled, seed for seed) whenever the
 * verifying batch gives the same logits as one token at a time
 * (`probeVerifyTokens` says up to how many tokens it does).
 *
 * Drafters: {@linkcode NgramSimple} (llama.cpp's `ngram-simple`: the tokens
 * that followed the last earlier occurrence of the sequence's last n tokens,
 * no second model) and {@linkcode DraftModel} (a small model of the same
 * vocabulary decoding greedily on its own context, llama.cpp's
 * `draft-simple`).
 *
 * @example Prompt lookup on one sequence
 * ```ts
 * import { Context, Model } from "../model/mod.ts";
 * import { Sampler } from "../sampler/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { generate } from "./generate.ts";
 * import { Driver } from "./driver.ts";
 * import { probeVerifyTokens } from "./invariance.ts";
 * import { NgramSimple } from "./speculative.ts";
 * const model = Model.load("../shared/testdata/models/stories260K.gguf");
 * const context = new Context(model, { contextSize: 256, maxLogits: 9, threads: 1 });
 * Driver.of(context, {
 *   speculation: { drafter: new NgramSimple({ sizeN: 2 }), verifyTokens: probeVerifyTokens(context, 9) },
 * });
 * const tokenizer = Tokenizer.fromGguf(model.gguf);
 * const sampler = new Sampler(model.config.vocabSize, { temperature: 0 }, 1);
 * const result = await generate({ context }, tokenizer, sampler, { prompt: "Once upon a time", maxTokens: 64 });
 * console.log(result.timings.draftedTokens, result.timings.acceptedTokens);
 * context.close();
 * model.close();
 * ```
 *
 * @module
 */
import { Batch } from "../model/batch.ts";
import { Context } from "../model/context.ts";
import { Model } from "../model/model.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import type { Vocab } from "../tokenizer/vocab.ts";
import { argmax } from "../sampler/sampler.ts";
import { probeVerifyTokens } from "./invariance.ts";

/** Proposes tokens to follow a sequence; the target model verifies them. */
export interface Drafter {
  /** The name in summaries (`ngram-simple`, `draft-simple`). */
  readonly name: string;
  /**
   * Writes at most `max` tokens likely to follow `history` (the tokens slot
   * `slot` of the target holds) and then `last` (the sampled token not yet
   * run) into `out`; returns how many.
   */
  draft(slot: number, history: Int32Array, last: number, max: number, out: Int32Array): number;
}

/** Speculation in the step driver (`DriverOptions.speculation`). */
export interface SpeculationOptions {
  readonly drafter: Drafter;
  /** Most drafted tokens per sequence and step (llama.cpp `--spec-draft-n-max`); default 16. */
  readonly draftMax?: number;
  /** Fewer drafted tokens than this are not verified (llama.cpp `--spec-draft-n-min`); default 0. */
  readonly draftMin?: number;
  /**
   * Most tokens in a batch that verifies drafts: a batch this size or smaller
   * gives each token the logits it gets alone (see `probeVerifyTokens`).
   */
  readonly verifyTokens: number;
}

/** Options of {@linkcode NgramSimple} (llama.cpp's `--spec-ngram-simple-size-n/-m`). */
export interface NgramSimpleOptions {
  /** Tokens of the n-gram looked up (default 12, llama.cpp's). */
  sizeN?: number;
  /** Most tokens drafted after a match (default 48, llama.cpp's). */
  sizeM?: number;
}

function sizeIn(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${value}`);
  }
  return value;
}

/**
 * llama.cpp's `ngram-simple` drafter (`common_ngram_simple_draft`): the last
 * `sizeN` tokens (the history's last `sizeN − 1` and the sampled one) are
 * looked up backwards in the history; the up to `sizeM` tokens that followed
 * the latest earlier occurrence are the draft (none when fewer than `sizeN`
 * follow it, or the history is shorter than `sizeN + sizeM + 1`).
 */
export class NgramSimple implements Drafter {
  readonly name = "ngram-simple";
  readonly sizeN: number;
  readonly sizeM: number;

  constructor(options: NgramSimpleOptions = {}) {
    this.sizeN = sizeIn("ngram-simple size n", options.sizeN ?? 12, 1, 1024);
    this.sizeM = sizeIn("ngram-simple size m", options.sizeM ?? 48, 1, 1024);
  }

  draft(_slot: number, history: Int32Array, last: number, max: number, out: Int32Array): number {
    const n = this.sizeN, len = history.length;
    if (len <= n + this.sizeM + 1) return 0;
    // The pattern: history[len - n + 1 .. len) then `last`; search backwards, skipping position 0.
    let match = 0;
    for (let j = len - n - 1; j > 0; j--) {
      let k = 0;
      while (k < n - 1 && history[j + k] === history[len - n + 1 + k]) k++;
      if (k === n - 1 && history[j + n - 1] === last) {
        match = j;
        break;
      }
    }
    if (match === 0) return 0;
    const copy = Math.min(this.sizeM, len - (match + n));
    if (copy < n) return 0;
    const count = Math.min(copy, max);
    for (let i = 0; i < count; i++) out[i] = history[match + n + i];
    return count;
  }
}

/** What {@linkcode draftVocabMismatch} compares (a tokenizer's vocabulary). */
export type DraftVocab = Pick<Vocab, "kind" | "tokens" | "addBos" | "bos" | "addEos" | "eos">;

/** llama.cpp's `SPEC_VOCAB_MAX_SIZE_DIFFERENCE`. */
const VOCAB_SIZE_DIFFERENCE_MAX = 128;
/** llama.cpp's `SPEC_VOCAB_CHECK_START_TOKEN_ID`. */
const VOCAB_CHECK_FROM = 5;

/**
 * Why a draft model's vocabulary cannot draft for the target's, or
 * undefined when it can: llama.cpp's `common_speculative_are_compatible`
 * (the same tokenizer kind, the same BOS/EOS use and ids, sizes within 128
 * and the same text for every token from id 5 on).
 */
export function draftVocabMismatch(target: DraftVocab, draft: DraftVocab): string | undefined {
  if (target.kind !== draft.kind) {
    return `the draft model's tokenizer is ${draft.kind}, the target's ${target.kind}`;
  }
  if (target.addBos !== draft.addBos || (target.addBos && target.bos !== draft.bos)) {
    return `the draft model's BOS (add ${draft.addBos}, id ${draft.bos}) is not the target's (add ${target.addBos}, id ${target.bos})`;
  }
  if (target.addEos !== draft.addEos || (target.addEos && target.eos !== draft.eos)) {
    return `the draft model's EOS (add ${draft.addEos}, id ${draft.eos}) is not the target's (add ${target.addEos}, id ${target.eos})`;
  }
  const nt = target.tokens.length, nd = draft.tokens.length;
  if (Math.abs(nt - nd) > VOCAB_SIZE_DIFFERENCE_MAX) {
    return `the draft model has ${nd} tokens, the target ${nt} (at most ${VOCAB_SIZE_DIFFERENCE_MAX} apart)`;
  }
  for (let i = VOCAB_CHECK_FROM; i < Math.min(nt, nd); i++) {
    if (target.tokens[i] !== draft.tokens[i]) {
      return `token ${i} is ${JSON.stringify(draft.tokens[i])} in the draft model, ${
        JSON.stringify(target.tokens[i])
      } in the target`;
    }
  }
  return undefined;
}

/** Options of {@linkcode DraftModel}. */
export interface DraftModelOptions {
  /** A drafted token whose draft probability is below this ends the draft (`--spec-draft-p-min`); default 0. */
  pMin?: number;
}

/**
 * llama.cpp's `draft-simple`: a draft model on its own context (one slot per
 * target slot) decodes greedily after what the target slot holds, keeping
 * the longest common prefix it already ran. The caller checks the
 * vocabularies ({@linkcode draftVocabMismatch}) and closes the context.
 */
export class DraftModel implements Drafter {
  readonly name = "draft-simple";
  readonly context: Context;
  readonly pMin: number;
  readonly #batch: Batch;
  /** Tokens the draft context ran (for the summary). */
  evaluated = 0;

  constructor(context: Context, options: DraftModelOptions = {}) {
    const pMin = options.pMin ?? 0;
    if (!(pMin >= 0 && pMin <= 1)) {
      throw new RangeError(`draft p-min must be in [0, 1], got ${pMin}`);
    }
    this.context = context;
    this.pMin = pMin;
    this.#batch = new Batch(context.batchSize);
  }

  draft(slot: number, history: Int32Array, last: number, max: number, out: Int32Array): number {
    const context = this.context, cache = context.cache, batch = this.#batch;
    if (slot >= cache.slotCount) return 0;
    const total = history.length + 1;
    if (total + max > context.contextSize) max = context.contextSize - total;
    if (max <= 0) return 0;
    // Keep what the draft slot holds of history + last, short of the last token (its logits are wanted).
    let keep = Math.min(cache.commonPrefix(slot, history), total - 1);
    keep = cache.truncate(slot, keep);
    const at = (i: number) => i < history.length ? history[i] : last;
    let logits: Float32Array | undefined;
    for (let start = keep; start < total; start += batch.capacity) {
      batch.clear();
      const end = Math.min(total, start + batch.capacity);
      for (let i = start; i < end; i++) batch.add(at(i), i, slot, i === total - 1);
      context.decode(batch);
      this.evaluated += end - start;
    }
    logits = context.logits(0);
    let count = 0;
    for (let pos = total;; pos++) {
      const id = argmax(logits);
      if (this.pMin > 0 && probabilityOf(logits, id) < this.pMin) break;
      out[count++] = id;
      if (count >= max) break;
      batch.clear();
      batch.add(id, pos, slot, true);
      context.decode(batch);
      this.evaluated++;
      logits = context.logits(0);
    }
    return count;
  }
}

/** The softmax probability of `id` under `logits`. */
function probabilityOf(logits: Float32Array, id: number): number {
  const top = logits[id];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - top);
  return 1 / sum;
}

/** The kinds of drafting dotllm has (llama.cpp's `--spec-type` names). */
export const SPECULATION_TYPES = ["draft-simple", "ngram-simple"] as const;
/** A kind of drafting. */
export type SpeculationType = typeof SPECULATION_TYPES[number];

/** How a model speculates: the one options type of the library, `run` and `serve`. */
export interface SpeculationConfig {
  /** Default: `draft-simple` with a `draftModel`, else `ngram-simple`. */
  type?: SpeculationType;
  /** The draft model's GGUF file (`-md`); needed by `draft-simple`. */
  draftModel?: string;
  /** Most tokens a draft model drafts per step (`--spec-draft-n-max`); default 3, llama.cpp's. */
  draftMax?: number;
  /** Fewer drafted tokens are not verified (`--spec-draft-n-min`); default 0. */
  draftMin?: number;
  /** A draft token below this draft probability ends the draft (`--spec-draft-p-min`); default 0. */
  pMin?: number;
  /** `--spec-ngram-simple-size-n` (default 12). */
  ngramSizeN?: number;
  /** `--spec-ngram-simple-size-m` (default 48): the most tokens an n-gram match drafts. */
  ngramSizeM?: number;
}

/** The drafting kind `config` asks for. */
export function speculationType(config: SpeculationConfig): SpeculationType {
  const type = config.type ?? (config.draftModel !== undefined ? "draft-simple" : "ngram-simple");
  if (!SPECULATION_TYPES.includes(type)) {
    throw new RangeError(
      `speculation type must be one of ${SPECULATION_TYPES.join(", ")}, got "${type}"`,
    );
  }
  return type;
}

/**
 * Most tokens drafted per sequence and step under `config`: the draft
 * model's `draftMax`, or the n-gram's `sizeM` (llama.cpp's limits). A
 * context that verifies them wants `1 + draftLimit` logits rows per sequence.
 */
export function draftLimit(config: SpeculationConfig): number {
  const type = speculationType(config);
  if (type === "ngram-simple") {
    return sizeIn("ngram-simple size m", config.ngramSizeM ?? 48, 1, 1024);
  }
  return sizeIn("draft n-max", config.draftMax ?? 3, 0, 1024);
}

/** How the draft model loads: the target's model options. */
export interface DraftLoadOptions {
  /** Kernel threads of the draft context; 0 = every CPU. */
  threads?: number;
  /** Repack matmul weights at load (`Model.load`'s `repack`). */
  repack?: boolean;
}

/** Speculation set up for one context: the driver's options and what to close. */
export interface Speculation {
  readonly options: SpeculationOptions;
  /** Summary line: the kind and its sizes. */
  readonly description: string;
  /** Frees the draft model, if any. */
  close(): void;
}

/**
 * Sets up `config` for `target` (its tokenizer's vocabulary `vocab`): the
 * drafter (a draft model, checked with llama.cpp's rule,
 * {@linkcode draftVocabMismatch}, on a context of the target's slots and
 * size), and how many tokens a step may verify (`probeVerifyTokens`;
 * empties slot 0). Throws `RangeError` for a bad size, the loader's error
 * for a bad file and `Error` for a draft model that cannot draft for this one.
 */
export function openSpeculation(
  target: Context,
  vocab: DraftVocab,
  config: SpeculationConfig,
  load: DraftLoadOptions = {},
): Speculation {
  const type = speculationType(config);
  const draftMax = draftLimit(config);
  const draftMin = config.draftMin ?? 0;
  if (!Number.isInteger(draftMin) || draftMin < 0) {
    throw new RangeError(`draft n-min must be an integer >= 0, got ${draftMin}`);
  }
  const verifyTokens = probeVerifyTokens(target, 1 + draftMax);
  if (type === "ngram-simple") {
    if (config.draftModel !== undefined) {
      throw new RangeError("speculation type ngram-simple takes no draft model");
    }
    const drafter = new NgramSimple({ sizeN: config.ngramSizeN, sizeM: config.ngramSizeM });
    return {
      options: { drafter, draftMax, draftMin, verifyTokens },
      description:
        `ngram-simple (n ${drafter.sizeN}, m ${drafter.sizeM}), verify <= ${verifyTokens}`,
      close() {},
    };
  }
  if (config.draftModel === undefined) {
    throw new RangeError("speculation type draft-simple needs a draft model");
  }
  const pMin = config.pMin ?? 0;
  if (!(pMin >= 0 && pMin <= 1)) throw new RangeError(`draft p-min must be in [0, 1], got ${pMin}`);
  const draft = Model.load(config.draftModel, { repack: load.repack });
  try {
    const why = draftVocabMismatch(vocab, Tokenizer.fromGguf(draft.gguf).vocab);
    if (why !== undefined) {
      throw new Error(
        `draft model "${config.draftModel}" cannot draft for this model: ${why} (llama.cpp's vocabulary rule)`,
      );
    }
    const context = new Context(draft, {
      slots: target.cache.slotCount,
      contextSize: Math.min(target.contextSize, draft.config.contextLength),
      threads: load.threads,
    });
    const drafter = new DraftModel(context, { pMin });
    return {
      options: { drafter, draftMax, draftMin, verifyTokens },
      description: `draft-simple "${config.draftModel}" (n-max ${draftMax}, n-min ${draftMin}, ` +
        `p-min ${pMin}), verify <= ${verifyTokens}`,
      close() {
        context.close();
        draft.close();
      },
    };
  } catch (error) {
    draft.close();
    throw error;
  }
}

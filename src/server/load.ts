/**
 * Loads a GGUF file into a {@linkcode LocalBackend}: the model, a context
 * with one slot per parallel sequence, the tokenizer and the chat template.
 *
 * @module
 */
import { statSync } from "node:fs";
import { basename } from "node:path";
import { prepareLibrary } from "../native/locate.ts";
import { Tokenizer } from "../tokenizer/mod.ts";
import type { LlmOptions } from "../llm/mod.ts";
import {
  draftLimit,
  openSpeculation,
  probeBatchInvariance,
  type Speculation,
  type SpeculationConfig,
} from "../generation/mod.ts";
import { Context, Model } from "../model/mod.ts";
import { LocalBackend } from "./backend.ts";
import { fimTokens } from "./native/infill.ts";
import type { ChatRenderer } from "./chat_prompt.ts";
import type { ChatTemplateInfo } from "./backend.ts";

/**
 * How to load the model for serving: the model's and the context's options
 * of {@linkcode LlmOptions} (those a Worker message can carry), and the
 * server's own.
 */
export interface LoadOptions
  extends Pick<LlmOptions, "threads" | "repack" | "cacheType" | "cacheTypeK" | "cacheTypeV"> {
  /** Slots (`--parallel`). */
  slots: number;
  /** Positions per slot (`-c`); 0 or absent = min(model context, 4096). */
  contextSize?: number;
  /** Most tokens per scheduler step; default 256. */
  stepTokens?: number;
  /** Speculative decoding on every slot (`-md`, `--spec-type`). */
  speculation?: SpeculationConfig;
  /** `--pooling`: the embeddings' pooling (mean, cls, last, none); default the model's, else mean. */
  pooling?: string;
  /**
   * The chat template's source text (`--chat-template`, resolved by the CLI
   * from a built-in's name or a file), used instead of the GGUF's own.
   */
  chatTemplate?: string;
  /**
   * In the model Worker: a counter (on a SharedArrayBuffer) of messages
   * posted to it and not yet received, which the step loop waits on between
   * steps (see `LocalBackend`).
   */
  inbox?: Int32Array;
}

/**
 * Loads `path` for serving; throws the loader's error for a bad file.
 * `makeRenderer` builds the chat renderer (the model Worker passes none: its
 * HTTP thread renders chats, so the Worker never loads the template engine).
 */
export async function loadBackend(
  path: string,
  options: LoadOptions,
  makeRenderer?: (chat: ChatTemplateInfo) => ChatRenderer,
): Promise<LocalBackend> {
  await prepareLibrary();
  const model = Model.load(path, { repack: options.repack });
  let context: Context;
  try {
    context = new Context(model, {
      slots: options.slots,
      // llama-server runs past the training context (with a warning); here a slot keeps to it
      contextSize: options.contextSize
        ? Math.min(options.contextSize, model.config.contextLength)
        : undefined,
      threads: options.threads,
      cacheType: options.cacheType,
      cacheTypeK: options.cacheTypeK,
      cacheTypeV: options.cacheTypeV,
      batchSize: Math.max(options.stepTokens ?? 256, options.slots),
      // A batch wants at most one row per sequence, and a verify step one per drafted token.
      maxLogits: options.slots +
        (options.speculation === undefined ? 0 : draftLimit(options.speculation)),
    });
  } catch (error) {
    model.close();
    throw error;
  }
  let speculation: Speculation | undefined;
  try {
    const tokenizer = Tokenizer.fromGguf(model.gguf);
    const mixed = generates(context) && probeBatchInvariance(context);
    if (options.speculation !== undefined) {
      speculation = openSpeculation(context, tokenizer.vocab, options.speculation, {
        threads: options.threads,
        repack: options.repack,
      });
    }
    const source = options.chatTemplate ?? model.gguf.metadata.get("tokenizer.chat_template");
    const text = (id: number) => (id >= 0 ? tokenizer.tokenToPiece(id, true) : "");
    const chat: ChatTemplateInfo = {
      source: typeof source === "string" && source !== "" ? source : undefined,
      bosToken: text(tokenizer.bos),
      eosToken: text(tokenizer.eos),
      addBos: tokenizer.addBos,
      addEos: tokenizer.vocab.addEos,
    };
    const render: ChatRenderer = makeRenderer?.(chat) ?? (() => {
      throw new Error("chat prompts are rendered on the HTTP thread");
    });
    const backendTokenizer = {
      encode: (s: string, o: { addSpecial: boolean; parseSpecial: boolean }) =>
        tokenizer.encode(s, o),
      decode: (ids: ArrayLike<number>) => tokenizer.decode(ids),
      createDecoder: () => tokenizer.createDecoder(),
      isEog: (id: number) => tokenizer.isEog(id),
      tokenToPiece: (id: number) => tokenizer.tokenToPiece(id, false),
      pieceBytes: (id: number, special?: boolean) => tokenizer.pieceBytes(id, special),
      vocabSize: tokenizer.vocabSize,
    };
    const backend = new LocalBackend(
      {
        id: basename(path),
        created: Math.floor(Date.now() / 1000),
        contextSize: context.contextSize,
        slotCount: options.slots,
        vocabSize: model.config.vocabSize,
        kvCacheBytes: context.memory.kvCacheBytes,
        chat,
        infill: {
          fim: fimTokens(model.gguf.metadata, tokenizer.vocab.tokens),
          bos: tokenizer.addBos ? tokenizer.bos : -1,
          batchSize: context.batchSize,
        },
      },
      context,
      backendTokenizer,
      render,
      // Decodes and prompt chunks share batches only where that changes no token.
      { stepTokens: options.stepTokens, mixed, speculation: speculation?.options },
      options.inbox,
      speculation,
    );
    backend.embeddingPooling = options.pooling;
    backend.slotIdentity = `${basename(path)} (${statSync(path).size} bytes)`;
    return backend;
  } catch (error) {
    speculation?.close();
    context.close();
    model.close();
    throw error;
  }
}

/** Whether the context's model generates text (an encoder such as BERT only embeds). */
function generates(context: Context): boolean {
  return context.model.weights.outputNorm !== undefined && context.model.config.causal;
}

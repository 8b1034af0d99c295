/**
 * Embeddings: hidden states pooled (mean, CLS, last, none) and normalized as
 * llama.cpp does, for encoders (BERT) and decoders alike.
 *
 * @module
 */
export {
  embeddingContextOptions,
  type EmbedOptions,
  embedSequences,
  resolvePooling,
} from "./embed.ts";
export { cosine, type EmbeddingPooling, normalize, pool } from "./pooling.ts";

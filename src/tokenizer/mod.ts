/**
 * Tokenizers identical to llama.cpp's: SentencePiece BPE (`llama`), byte-level
 * BPE with llama.cpp's pre-tokenizers (`gpt2`), special tokens, streaming decode.
 *
 * @module
 */
export { type EncodeOptions, Tokenizer } from "./tokenizer.ts";
export { loadVocab, NO_TOKEN, TokenAttr, TokenizerError } from "./vocab.ts";
export type { Vocab, VocabKind } from "./vocab.ts";
export type { DecodeOptions, StreamDecoder, StreamOptions } from "./decode.ts";

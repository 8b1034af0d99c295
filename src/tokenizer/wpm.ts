/**
 * WordPiece (`tokenizer.ggml.model = "bert"`): not supported yet.
 *
 * @module
 */
import { TokenizerError, type Vocab } from "./vocab.ts";

/** Tokens of one text fragment, appended to `out`. */
export function wpmEncode(_vocab: Vocab, _text: string, _out: number[]): void {
  throw new TokenizerError('tokenizer "bert" (WordPiece) is not supported yet');
}

/** Why a conversion failed: one line, naming the file and what is wrong. @module */

/** A conversion refused: a missing or malformed input file, or an unsupported model. */
export class ConvertError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConvertError";
  }
}

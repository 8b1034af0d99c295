/** The model layer's error type. @module */

/** A model the loader cannot run: a bad or unsupported key, tensor or type. */
export class ModelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelError";
  }
}

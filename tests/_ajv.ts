/**
 * A JSON Schema validator (ajv, draft 2020-12, with the `format` checks of
 * ajv-formats) for tests that check generated JSON.
 *
 * @module
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import formats from "ajv-formats";

// ajv-formats is CommonJS: its plugin is the module's default export.
const addFormats = ((formats as unknown as { default?: unknown }).default ?? formats) as (
  ajv: Ajv2020,
) => void;

/** A validator for `schema`: call it on a value; `errors` explains a failure. */
export function validator(schema: unknown): ((value: unknown) => boolean) & { errors?: unknown } {
  const ajv = new Ajv2020({ strict: false });
  addFormats(ajv);
  return ajv.compile(schema as object);
}

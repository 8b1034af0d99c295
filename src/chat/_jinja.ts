/**
 * `@huggingface/jinja`, loaded the way each runtime resolves npm packages:
 * Deno by the full `npm:` specifier (so the package also works when loaded
 * over http(s) or from JSR, where deno.json's import map does not apply), Bun
 * by the bare name (Bun has no `npm:` specifiers; `bun build` bundles it and
 * leaves the `npm:` branch external). Keep the version in step with deno.json.
 *
 * @module
 */
// deno-lint-ignore no-import-prefix -- over http(s) deno.json's import map does not apply
import type * as Jinja from "npm:@huggingface/jinja@0.5.13";

const jinja: typeof Jinja = "Bun" in globalThis
  ? await import("@huggingface/jinja")
  // deno-lint-ignore no-import-prefix -- as above
  : await import("npm:@huggingface/jinja@0.5.13");

/** The Jinja engine's classes. */
export const { Environment, Interpreter, Template } = jinja;
/** A parsed template. */
export type Program = Jinja.Template["parsed"];

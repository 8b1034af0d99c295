/**
 * Objects whose number fields V8 keeps as tagged (boxed) values. A field V8
 * stores as a raw double is boxed anew (an allocation) each time its value is
 * handed to a function that is not inlined, such as a kernel wrapper: the
 * forward pass passes addresses (doubles above 2^31) a few hundred times per
 * token. A field that held a string first stays tagged, and the same box is
 * passed every time.
 *
 * @module
 */

/** A copy of `fields` with every field tagged (allocation-free to read and pass on). */
export function tagged<T extends object>(fields: T): T {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(fields)) out[key] = "";
  Object.assign(out, fields);
  return out as T;
}

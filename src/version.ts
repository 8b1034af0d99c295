/** dotllm's version; equals `version` in deno.json (a test checks it). */
export const VERSION = "0.1.0";

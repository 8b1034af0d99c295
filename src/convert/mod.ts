/**
 * `dotllm convert`: Hugging Face safetensors folders to GGUF, laid out as
 * llama.cpp's `convert_hf_to_gguf.py` lays them out.
 *
 * @module
 */
export {
  convertHf,
  type ConvertOptions,
  OUT_TYPES,
  type OutType,
  planConversion,
} from "./convert.ts";
export { ConvertError } from "./errors.ts";
export { indexSafetensors, readSafetensorsHeader, type SafetensorsTensor } from "./safetensors.ts";

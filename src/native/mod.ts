/** The native bridge: locating, loading and calling the Zig library. @module */
export { CpuFeature, loadNative, MappedFile, Native, NativeBuffer } from "./native.ts";
export {
  cacheDir,
  libraryCandidates,
  type LibraryChoice,
  libraryFileName,
  locateLibrary,
  platformName,
  prepareLibrary,
  releaseFileName,
} from "./locate.ts";
export { ABI_VERSION, symbols } from "./symbols.ts";
export type { NativeFunctions, NativeType, Symbols, SymbolSpec } from "./symbols.ts";
export type { Runtime } from "./_adapter.ts";

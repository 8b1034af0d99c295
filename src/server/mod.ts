/**
 * `dotllm serve`: an OpenAI-compatible HTTP server with continuous batching
 * over several sequences, a built-in chat page, metrics and limits.
 *
 * @module
 */
export { type Backend, type GenerateInput, LocalBackend, type ModelInfo } from "./backend.ts";
export { ApiHandler, type HandlerOptions } from "./handler.ts";
export { type HttpServer, listen } from "./http.ts";
export { loadBackend, type LoadOptions } from "./load.ts";
export { ApiError } from "./protocol.ts";
export { Scheduler, type SchedulerStats, type SequenceEvent } from "./scheduler.ts";
export { WorkerBackend } from "./worker_backend.ts";

/**
 * Chat: a model's chat template rendered as llama.cpp renders it, the named
 * built-ins, and a conversation that keeps its tokens in the KV cache.
 *
 * @module
 */
export {
  ChatInputError,
  type ChatMessage,
  ChatTemplate,
  ChatTemplateError,
  type ChatTemplateTokens,
  type ChatTool,
  type ContentPart,
  type RenderOptions,
  type ToolCall,
} from "./template.ts";
export {
  BUILTIN_TEMPLATE_NAMES,
  BUILTIN_TEMPLATES,
  type BuiltinTemplateName,
  isBuiltinTemplateName,
} from "./builtins.ts";
export { chatTemplateFor, ggufChatTemplate, templateTokens } from "./model_template.ts";
export { strftime } from "./strftime.ts";
export {
  ChatSession,
  type ChatSessionOptions,
  type ChatTarget,
  type ChatTurn,
  type ChatTurnOptions,
} from "./session.ts";
export { applyChatTemplate, type ApplyTemplateOptions, cachedChatTemplate } from "./apply.ts";
export { type ChatPlan, type ChatRequestInput, planChat } from "./plan.ts";

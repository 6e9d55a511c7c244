export {
  AnthropicBackend,
  type AnthropicBackendOptions,
  DEFAULT_FIRST_BYTE_TIMEOUT_MS,
  DEFAULT_STREAM_TOTAL_TIMEOUT_MS,
  DEFAULT_TOTAL_TIMEOUT_MS,
} from "./anthropic-backend.js";
export { rejectsTemperature, type ThinkingStyle, thinkingStyleFor } from "./claude-models.js";

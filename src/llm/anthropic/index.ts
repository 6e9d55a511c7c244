export { AnthropicBackend, type AnthropicBackendOptions } from "./anthropic-backend.js";
export { rejectsTemperature, type ThinkingStyle, thinkingStyleFor } from "./claude-models.js";

export type { OpenAIBackendOptions } from "../openai-shared/create-openai-client.js";
export { OpenAIChatBackend } from "./openai-chat-backend.js";

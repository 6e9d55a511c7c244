export type { OpenAIBackendOptions } from "../openai-shared/create-openai-client.js";
export { OpenAIResponsesBackend } from "./openai-responses-backend.js";

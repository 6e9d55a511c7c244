/**
 * `agentloop/testing`: helpers for testing agents without a real model. (A minimal first version:
 * the testing kit replaces it.)
 *
 * @packageDocumentation
 */
export {
  type Script,
  ScriptedBackend,
  type ScriptedFailure,
  type ScriptedRequest,
  type ScriptedResponse,
  type ScriptedStep,
  type ScriptedToolCall,
} from "../llm/scripted-backend.js";

/**
 * agentloop's public API (the `agentloop` package export): build agents and tools in code, serve
 * them on a bus, read their events. Everything here follows semver from 1.0; in 0.x a minor
 * version may break it (said in the release notes).
 *
 * This entry holds what most programs need. Groups that stand alone have an entry of their own:
 * - `agentloop/errors`: every error class, the code table, errors as data;
 * - `agentloop/bus`: the transport, the subjects and the NATS contract's schemas;
 * - `agentloop/events`: the event types, their schemas and the one parser (loads nothing else);
 * - `agentloop/models`: model backends and the types to write one;
 * - `agentloop/testing`: the testing kit (a scripted model, fake providers, path coverage).
 *
 * @example
 * ```ts
 * import { createAgent, createBackend, createToolSet, defineTool, RetryingLlmClient, z } from "agentloop";
 *
 * const add = defineTool({
 *   name: "add",
 *   description: "Adds two numbers.",
 *   parameters: z.object({ a: z.number(), b: z.number() }),
 *   execute: ({ a, b }) => String(a + b),
 * });
 * const agent = await createAgent({
 *   llm: new RetryingLlmClient({ backend: createBackend({ provider: "anthropic" }, process.env) }),
 *   model: "claude-sonnet-4-5",
 *   toolSets: [createToolSet({ name: "math", tools: [add] })],
 * });
 * console.log((await agent.chat("What is 40 + 2?")).result);
 * ```
 *
 * @packageDocumentation
 */

/** The zod this package validates with: tool parameters and config schemas use it (`z.object(…)`). */
export { z } from "zod";

// Creating agents: one agent in this process, its model client and its conversation history
export type { Agent, AgentOptions, ChatOptions, ChatResult, CreateAgentParams } from "./agent/agent-types.js";
// Errors: the root, its codes, and the errors a caller of this entry catches (all of them are in
// `agentloop/errors`)
export { ChatCancelledError, ChatFailedError } from "./agent/chat-errors.js";
export { createAgent } from "./agent/create-agent.js";
// The bus: where a host answers and publishes (the rest of the contract is `agentloop/bus`)
export type { Bus } from "./bus/bus.js";
export { ChatReply, ChatRequest, ControlReply, ControlRequest } from "./bus/contract.js";
export { LocalBus, type LocalBusOptions } from "./bus/local-bus.js";
export { NatsBus, type NatsBusOptions } from "./bus/nats-bus.js";
export { chatSubject, controlSubject, DEFAULT_PREFIX } from "./bus/subjects.js";
// Configuration: agents as a config file declares them (`agentloop serve --config`, `startHost`)
export { AgentConfig, AgentloopConfig, defineConfig } from "./config/agent-config.js";
export { AgentDefinition, AgentDefinitionsError, AgentsFile } from "./config/agent-definitions.js";
export type { ContextHistory } from "./context/context-history.js";
export { InMemoryContextHistory } from "./context/in-memory-history.js";
export type { NatsContextHistory } from "./context/nats-context-history.js";
export { NatsHistoryStore } from "./context/nats-history-store.js";
export { AgentloopError, isAgentloopError } from "./errors/agentloop-error.js";
export { ConfigurationError } from "./errors/configuration-error.js";
export { type AgentloopErrorCode, ERROR_CODE_TABLE } from "./errors/error-code.js";
// Events: what an agent publishes at each step, and the one parser (the schemas are `agentloop/events`)
export { type ParsedEvent, parseEvent, parseEventJson } from "./events/parse-event.js";
export { type AgentEvent, EVENT_KINDS, type EventKind, type EventOf } from "./events/types.js";
// Running a host: agents served on a bus, one actor per session (what `agentloop serve` runs)
export { type RunningHost, type StartHostOptions, startHost } from "./host/start-host.js";
export { type BackendConfig, createBackend, ProviderName } from "./llm/create-backend.js";
export type { LlmClient } from "./llm/llm-client.js";
export { RetryingLlmClient, type RetryingLlmClientOptions } from "./llm/retrying-client.js";
export type { Message, TokenUsage } from "./llm/types.js";
// Tools: what the model may call (the testing kit, with a scripted model, is `agentloop/testing`)
export { type CreateToolSetParams, createToolSet, type StatefulToolSet } from "./tools/create-tool-set.js";
export { type DefineToolParams, defineTool, type Tool } from "./tools/define-tool.js";
export type { ToolContext, ToolSet } from "./tools/tool-set.js";

/** This package's version (from its package.json). */
export { VERSION } from "./version.js";

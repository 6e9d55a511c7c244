import { throwIfAborted } from "../llm/abortable-sleep.js";
import { type RetryInfo, RetryingLlmClient } from "../llm/retrying-client.js";
import { type Script, ScriptedBackend, type ScriptedRequest } from "./scripted-backend.js";

/** Options of {@link scriptedModel}. */
export interface ScriptedModelOptions {
  /** Attempts per request, the first included, as the real client counts them. @defaultValue 3 */
  maxAttempts?: number;
  /** Called before each retry (a scripted fault is retried like the provider's). @defaultValue none */
  onRetry?: (info: RetryInfo) => void;
}

/**
 * A scripted model as the agent takes it (`createAgent({ llm })`): the real
 * {@link RetryingLlmClient} in front of a {@link ScriptedBackend}, with backoff that does not wait
 * (a retry after a scripted `rate_limit` happens at once, still honouring cancellation).
 */
export class ScriptedModel extends RetryingLlmClient {
  /** The backend that plays the script. */
  readonly scripted: ScriptedBackend;

  constructor(script: Script, options: ScriptedModelOptions = {}) {
    const scripted = new ScriptedBackend(script);
    super({
      backend: scripted,
      maxAttempts: options.maxAttempts ?? 3,
      sleep: async (_ms, signal) => throwIfAborted(signal),
      ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    });
    this.scripted = scripted;
  }

  /** Every request the model received (retries included), in order, as deep copies. */
  get requests(): readonly ScriptedRequest[] {
    return this.scripted.requests;
  }
}

/**
 * A model whose turns are data, for tests: `createAgent({ llm: scriptedModel([...]) })`. Each
 * request takes the next turn: text (whole or as `deltas`), reasoning, tool calls, usage, or a
 * `fault` (`rate_limit`, `server_error`, `disconnect_after`) that the real retrying client retries
 * as it would a provider's. {@link ScriptedModel.requests} records what the model was asked.
 *
 * @param script The turns, in order; a request past the last one fails the chat.
 * @param options Attempts per request and a retry hook.
 * @returns The model client, with `requests` to assert on.
 *
 * @example
 * ```ts
 * import { createAgent, createToolSet, defineTool, z } from "agentloop";
 * import { scriptedModel } from "agentloop/testing";
 *
 * const readFile = defineTool({
 *   name: "read_file",
 *   description: "Reads a file.",
 *   parameters: z.object({ path: z.string() }),
 *   execute: () => "hi",
 * });
 * const model = scriptedModel([
 *   { toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }] },
 *   { fault: "rate_limit" }, // retried at once: the scripted model does not wait
 *   { reasoning: "The file says hi.", text: "It says hi." },
 * ]);
 * const agent = await createAgent({
 *   llm: model,
 *   model: "any",
 *   toolSets: [createToolSet({ name: "files", tools: [readFile] })],
 * });
 * const { result } = await agent.chat("What does a.txt say?");
 * // result === "It says hi."; model.requests holds the three requests, the retry included.
 * ```
 */
export function scriptedModel(script: Script, options: ScriptedModelOptions = {}): ScriptedModel {
  return new ScriptedModel(script, options);
}

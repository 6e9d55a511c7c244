import { throwIfAborted } from "../llm/abortable-sleep.js";
import { type RetryInfo, RetryingLlmClient } from "../llm/retrying-client.js";
import { type Script, ScriptedBackend, type ScriptedRequest } from "./scripted-backend.js";

/** Options of {@link scriptedModel}. */
export interface ScriptedModelOptions {
  /** Attempts per request, the first included, as the real client counts them. Default 3. */
  maxAttempts?: number;
  /** Called before each retry (a scripted fault is retried like the provider's). */
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
 * A model whose turns are data, for `createAgent({ llm: scriptedModel([...]) })`:
 *
 * ```ts
 * const model = scriptedModel([
 *   { toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }] },
 *   { fault: "rate_limit" },
 *   { reasoning: "The file says hi.", text: "It says hi." },
 * ]);
 * ```
 *
 * Each request takes the next turn; {@link ScriptedModel.requests} records what was asked.
 */
export function scriptedModel(script: Script, options: ScriptedModelOptions = {}): ScriptedModel {
  return new ScriptedModel(script, options);
}

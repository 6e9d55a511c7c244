import { createEventEmitter, type EventEmitter } from "../events/event-emitter.js";
import type { AgentEvent } from "../events/types.js";
import { SessionJournal } from "../journal/session-journal.js";
import type { LlmOptions } from "../llm/types.js";
import { createAgentTracing } from "../telemetry/agent-tracing.js";
import { NO_SECRETS } from "../text/secret-redactor.js";
import type { ToolSet } from "../tools/tool-set.js";
import { AgentSession, type ChatSettings } from "./agent-session.js";
import type { Agent, AgentOptions, CreateAgentParams } from "./agent-types.js";

export const DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant.";
export const DEFAULT_MAX_ITERATIONS = 20;
export const DEFAULT_CONTEXT_COMPACT_RATIO = 0.7;
export const DEFAULT_TOKEN_LIMIT = 128_000;
export const DEFAULT_MAX_CONCURRENT_TOOL_CALLS = 4;

/**
 * System prompts already built, so sessions of one agent share one string: built per session, the
 * same few hundred bytes were held once per live session. Bounded, in case prompts vary per session.
 */
const BUILT_SYSTEM_PROMPTS = new Map<string, string>();
const MAX_BUILT_SYSTEM_PROMPTS = 256;

/** The system prompt: the agent's own, then each ToolSet's static prompt, so the model learns each tool set's rules once. */
export function buildSystemPrompt(systemPrompt: string, toolSets: readonly ToolSet[]): string {
  const prompts = toolSets.map((set) => set.prompt().trim()).filter((text) => text !== "");
  if (prompts.length === 0) return systemPrompt;
  const built = [systemPrompt, ...prompts].join("\n\n");
  const known = BUILT_SYSTEM_PROMPTS.get(built);
  if (known !== undefined) return known;
  if (BUILT_SYSTEM_PROMPTS.size < MAX_BUILT_SYSTEM_PROMPTS) BUILT_SYSTEM_PROMPTS.set(built, built);
  return built;
}

/** The approval list of an agent that has none (shared: one empty set per process, not per session). */
const NO_TOOL_NAMES: ReadonlySet<string> = new Set();

const IGNORE = (): void => {};
const randomId = (): string => crypto.randomUUID();

/** A best-effort callback: its exceptions never reach the chat (a logging hook must not fail a conversation). */
function swallow<A extends unknown[]>(callback: ((...args: A) => void) | undefined): (...args: A) => void {
  if (!callback) return IGNORE;
  return (...args) => {
    try {
      callback(...args);
    } catch {
      // Callbacks are best-effort: a failing observer must not fail the chat.
    }
  };
}

/** The model options every request of the session starts from. */
function baseLlmOptions(model: string, options: AgentOptions): LlmOptions {
  return {
    model,
    ...(options.maxOutputTokens !== undefined ? { maxTokens: options.maxOutputTokens } : {}),
    ...(options.reasoningEffort !== undefined ? { reasoningEffort: options.reasoningEffort } : {}),
    ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
    ...(options.promptCaching ? { promptCaching: true } : {}),
    ...(options.streamIdleTimeoutMs !== undefined
      ? { streamIdleTimeoutMs: options.streamIdleTimeoutMs }
      : {}),
  };
}

/**
 * Settings already resolved, so the sessions of one agent share one settings object (its model
 * options and approval list too): resolved per session, each idle session held its own copy of
 * the same values. Keyed by every value that goes into them; bounded like the built prompts.
 */
const RESOLVED_SETTINGS = new Map<string, ChatSettings>();
const MAX_RESOLVED_SETTINGS = 256;

/** The agent's options with the defaults filled in (see AgentOptions); shared between equal ones. */
function resolveChatSettings(params: CreateAgentParams, toolSets: readonly ToolSet[]): ChatSettings {
  const options = params.options ?? {};
  const settings: ChatSettings = {
    systemPrompt: buildSystemPrompt(options.systemPrompt ?? DEFAULT_SYSTEM_PROMPT, toolSets),
    baseOptions: baseLlmOptions(params.model, options),
    maxIterations: options.maxIterations ?? DEFAULT_MAX_ITERATIONS,
    contextCompactRatio: options.contextCompactRatio ?? DEFAULT_CONTEXT_COMPACT_RATIO,
    tokenLimit: options.tokenLimit ?? DEFAULT_TOKEN_LIMIT,
    maxConcurrentToolCalls: Math.max(1, options.maxConcurrentToolCalls ?? DEFAULT_MAX_CONCURRENT_TOOL_CALLS),
    approvalList:
      options.needsApproval !== undefined && options.needsApproval.length > 0
        ? new Set(options.needsApproval)
        : NO_TOOL_NAMES,
  };
  const key = JSON.stringify([
    settings.systemPrompt,
    settings.baseOptions,
    settings.maxIterations,
    settings.contextCompactRatio,
    settings.tokenLimit,
    settings.maxConcurrentToolCalls,
    [...settings.approvalList].sort(),
  ]);
  const known = RESOLVED_SETTINGS.get(key);
  if (known !== undefined) return known;
  if (RESOLVED_SETTINGS.size < MAX_RESOLVED_SETTINGS) RESOLVED_SETTINGS.set(key, settings);
  return settings;
}

/**
 * The session's event emitter: its listeners (onLog, then the tracing spans' listener, if any) and
 * a seq that goes on from where the session's last instance left it (passivation, restart).
 */
async function createSessionEvents(
  params: CreateAgentParams,
  name: string,
  session: string,
  listeners: Array<(event: AgentEvent) => void>,
): Promise<EventEmitter> {
  const { history } = params;
  return createEventEmitter({
    agent: name,
    session,
    ...(params.host === undefined ? {} : { host: params.host }),
    listeners,
    redactor: params.redactor ?? NO_SECRETS,
    ...(params.now ? { now: params.now } : {}),
    ...(history?.loadSeq && history.saveSeq
      ? {
          lastSeq: await history.loadSeq(),
          reserveSeq: (mark: number) => void history.saveSeq?.(mark).catch(() => {}),
        }
      : {}),
  });
}

/**
 * Creates one agent session in this process: a conversation with a model that may call your tools,
 * run by the chat, iteration and compaction statecharts. Call {@link Agent.chat} for each user
 * message; chats run one at a time, each until the model answers or `maxIterations` is reached. With
 * a `history` the conversation is restored from it and kept in it; without one it lives in memory.
 * To serve agents to other processes, use `startHost` instead.
 *
 * @param params The model client and model name, the session's tools, history and options.
 * @returns The agent, its context restored from `params.history` when given.
 * @throws Whatever `params.history` throws while it is read (e.g. a `CorruptHistoryError`).
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
 *   options: { systemPrompt: "You do sums.", maxIterations: 5, onLog: (event) => console.log(event.kind) },
 * });
 * const { result, usage } = await agent.chat("What is 40 + 2?");
 * console.log(result, usage.total);
 * ```
 */
export async function createAgent(params: CreateAgentParams): Promise<Agent> {
  const options: AgentOptions = params.options ?? {};
  const name = params.name ?? "agent";
  const session = params.session ?? "default";
  const toolSets = (params.toolSets ?? []).map((set) => set.copy());
  const listeners: Array<(event: AgentEvent) => void> = [];
  if (options.onLog) listeners.push(options.onLog);
  // StateChanged (an inspector on every machine) is for the log: spans need no states.
  const isReportingStates = listeners.length > 0;
  // Spans are built from the events (src/telemetry); untraced, the session gets no listener at all.
  const tracing = createAgentTracing({
    agent: name,
    session,
    model: params.model,
    llm: params.llm,
    // Spans leave the process like events: the same secrets are hidden in them.
    ...(params.redactor === undefined ? {} : { redactor: params.redactor }),
    ...params.tracing,
  });
  if (tracing) listeners.push(tracing.listener);
  const events = await createSessionEvents(params, name, session, listeners);
  return AgentSession.create({
    name,
    session,
    settings: resolveChatSettings(params, toolSets),
    llm: tracing?.llm ?? params.llm,
    events,
    listeners,
    history: params.history,
    toolSets,
    redactor: params.redactor ?? NO_SECRETS,
    recordMessage: swallow(options.onMessageRecorded),
    post: params.post,
    ...(tracing === undefined ? {} : { traceparentOf: tracing.traceparentOf }),
    checkBudget: params.checkBudget,
    isOrderedByMailbox: params.isOrderedByMailbox ?? false,
    isReportingStates,
    inspect: params.inspect,
    parked: await params.history?.loadPendingApproval?.(),
    // The session's unfinished work, journaled step by step so another start can resume it.
    journal: params.journal ? await SessionJournal.open(params.journal, name, session) : undefined,
    createId: params.createId ?? randomId,
  });
}

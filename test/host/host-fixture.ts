import type { Bus } from "../../src/bus/bus.js";
import type { ResolvedAgentDefinition } from "../../src/config/agent-definitions.js";
import type { AgentEvent } from "../../src/events/types.js";
import { AgentHost, type AgentHostOptions } from "../../src/host/agent-host.js";
import { createSessionAgentFactory } from "../../src/host/create-session-agent.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import { textOf } from "../../src/llm/types.js";
import {
  type Script,
  ScriptedBackend,
  type ScriptedRequest,
  type ScriptedStep,
} from "../../src/testing/index.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";

/** Text that makes the scripted model stream for a minute (until cancelled). */
export const SLOW = "__slow__";

/** `__sleep:N__`: the scripted model pauses N ms before each of its two deltas. */
export function sleepText(ms: number): string {
  return `__sleep:${ms}__`;
}

/** The last user message's text of a scripted request. */
export function lastUserText(request: ScriptedRequest): string {
  const user = request.messages.filter((message) => message.role === "user").at(-1);
  return user === undefined ? "" : textOf(user.content);
}

/**
 * The default scripted model: `echo: <text>` in three deltas; {@link SLOW} streams until cancelled;
 * {@link sleepText} pauses before each delta.
 */
export function echoStep(request: ScriptedRequest): ScriptedStep {
  const text = lastUserText(request);
  if (text === SLOW) return { deltas: ["la", "te"], delayMs: 60_000 };
  const sleep = /^__sleep:(\d+)__$/.exec(text);
  if (sleep) return { deltas: ["wo", "ke"], delayMs: Number(sleep[1]) };
  return { deltas: ["echo", ": ", text] };
}

export function definition(
  name: string,
  overrides: Partial<ResolvedAgentDefinition> = {},
): ResolvedAgentDefinition {
  return { name, provider: "demo", model: "scripted", tools: [], contextWindow: 100_000, ...overrides };
}

export interface HostFixture {
  host: AgentHost;
  bus: Bus;
  prefix: string;
  /** Each agent's scripted model. */
  backends: Map<string, ScriptedBackend>;
  /** Every event published under the prefix, as received from the bus, with its subject. */
  events: { subject: string; event: AgentEvent }[];
  /** Sends a request and parses the JSON reply. */
  request(agent: string, verb: "chat" | "control", payload: unknown, timeoutMs?: number): Promise<unknown>;
  close(): Promise<void>;
}

/** An agent host on `bus` under a fresh prefix, agents on scripted models, every event recorded. */
export async function startHostFixture(
  bus: Bus,
  options: {
    definitions?: ResolvedAgentDefinition[];
    scripts?: Record<string, Script>;
    host?: Partial<AgentHostOptions>;
  } = {},
): Promise<HostFixture> {
  const prefix = uniqueRoot();
  const definitions = options.definitions ?? [definition("bot"), definition("helper")];
  const backends = new Map<string, ScriptedBackend>();
  const factory = createSessionAgentFactory({
    definitions,
    bus,
    prefix,
    createBackend: (agent) => {
      const backend = new ScriptedBackend(options.scripts?.[agent.name] ?? echoStep);
      backends.set(agent.name, backend);
      return backend;
    },
    createClient: (backend) => new RetryingLlmClient({ backend, maxAttempts: 1 }),
  });
  const inbox = record(bus, `${prefix}.events.>`);
  const host = new AgentHost({
    bus,
    prefix,
    agents: definitions.map((agent) => agent.name),
    createAgent: factory.createAgent,
    ...options.host,
  }).start();
  await bus.flush();
  return {
    host,
    bus,
    prefix,
    backends,
    get events() {
      return inbox.messages.map((message) => ({
        subject: message.subject,
        event: JSON.parse(message.data) as AgentEvent,
      }));
    },
    async request(agent, verb, payload, timeoutMs = 10_000) {
      const data = typeof payload === "string" ? payload : JSON.stringify(payload);
      const reply = await bus.request(`${prefix}.agents.${agent}.${verb}`, data, { timeoutMs });
      return JSON.parse(reply.data) as unknown;
    },
    async close() {
      await host.close({ graceMs: 0 });
      inbox.unsubscribe();
      factory.close();
    },
  };
}

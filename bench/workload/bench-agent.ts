import type { InspectionEvent } from "xstate";
import type { Agent } from "../../src/agent/agent-types.js";
import { createAgent } from "../../src/agent/create-agent.js";
import type { ContextHistory } from "../../src/context/context-history.js";
import type { AgentEvent } from "../../src/events/types.js";
import type { ChatJournal } from "../../src/journal/chat-journal.js";
import type { LlmClient } from "../../src/llm/llm-client.js";
import { benchToolSet } from "./bench-tool.js";

/** The system prompt, model name and agent name every loop under test uses. */
export const BENCH_SYSTEM_PROMPT = "You are a helpful assistant.";
export const BENCH_MODEL = "bench-model";
export const BENCH_AGENT = "bench";

export interface BenchAgentParams {
  /** One client per backend, shared by the sessions (as the host does). */
  llm: LlmClient;
  session: string;
  /** Events on when set (e.g. `createBusEventPublisher(bus)`). */
  onLog?: (event: AgentEvent) => void;
  history?: ContextHistory;
  /** The durable path's journal (`--db`: SQLite, `--history nats`: KV). */
  journal?: ChatJournal;
  maxIterations?: number;
  /** An XState inspector on the session's machines (bench/loop-work.ts counts their steps). */
  inspect?: (inspection: InspectionEvent) => void;
}

/** An agentloop session as the host would build it: createAgent with the bench's tool set. */
export function createBenchAgent(params: BenchAgentParams): Promise<Agent> {
  return createAgent({
    name: BENCH_AGENT,
    session: params.session,
    llm: params.llm,
    model: BENCH_MODEL,
    toolSets: [benchToolSet],
    ...(params.history ? { history: params.history } : {}),
    ...(params.journal ? { journal: params.journal } : {}),
    ...(params.inspect ? { inspect: params.inspect } : {}),
    options: {
      systemPrompt: BENCH_SYSTEM_PROMPT,
      ...(params.maxIterations !== undefined ? { maxIterations: params.maxIterations } : {}),
      ...(params.onLog ? { onLog: params.onLog } : {}),
    },
  });
}

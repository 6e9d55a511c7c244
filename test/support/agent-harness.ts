import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { z } from "zod";
import type { Agent, AgentOptions, CreateAgentParams } from "../../src/agent/agent-types.js";
import { createAgent } from "../../src/agent/create-agent.js";
import type { ContextHistory } from "../../src/context/context-history.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import type { AgentEvent, EventKind, EventOf } from "../../src/events/types.js";
import type { Message } from "../../src/llm/types.js";
import {
  type Script,
  type ScriptedBackend,
  type ScriptedModel,
  scriptedModel,
} from "../../src/testing/index.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool, type Tool } from "../../src/tools/define-tool.js";
import type { ToolContext, ToolSet } from "../../src/tools/tool-set.js";

/**
 * Shared helpers for the agent behaviour tests: an agent on the testing kit's {@link scriptedModel}
 * (a scripted backend behind the real retrying client: no HTTP, no real backoff), with every event
 * and every recorded message
 * collected, plus controllable tools and temporary SQLite files.
 */

export interface TestAgentParams {
  /** What the scripted model answers, request by request. */
  script: Script;
  /** Tools offered to the model, wrapped in one ToolSet named "test". */
  tools?: readonly Tool[];
  /** ToolSets offered as they are (after `tools`' set). */
  toolSets?: readonly ToolSet[];
  history?: ContextHistory;
  /** Where the session's unfinished work is journaled. */
  journal?: CreateAgentParams["journal"];
  /** Agent options; `onLog` and `onMessageRecorded` are chained after the harness's own recorders. */
  options?: AgentOptions;
  name?: string;
  session?: string;
  /** Attempts per model request (default 3). */
  maxAttempts?: number;
  /** OpenTelemetry tracing (e.g. a tracer on an in-memory exporter). */
  tracing?: CreateAgentParams["tracing"];
  redactor?: CreateAgentParams["redactor"];
  /** The session mailbox tools post to (a host passes its session's). */
  post?: CreateAgentParams["post"];
}

export interface TestAgent {
  agent: Agent;
  backend: ScriptedBackend;
  client: ScriptedModel;
  /** Every event, in the order it was emitted. */
  events: AgentEvent[];
  /** Every message onMessageRecorded saw. */
  recorded: Message[];
  /** The events of one kind, typed. */
  eventsOf<K extends EventKind>(kind: K): EventOf<K>[];
}

/** A deterministic clock: every reading is one millisecond later than the one before. */
export function createTestClock(start = Date.UTC(2026, 0, 1)): () => Date {
  let now = start;
  return () => new Date(now++);
}

/** Builds an agent the way the host does, but on a scripted model with recorders attached. */
export async function createTestAgent(params: TestAgentParams): Promise<TestAgent> {
  // Resets are tested for what they emit, not for how long they wait: the kit's model does not.
  const client = scriptedModel(params.script, { maxAttempts: params.maxAttempts ?? 3 });
  const backend = client.scripted;
  const events: AgentEvent[] = [];
  const recorded: Message[] = [];
  const userOptions = params.options ?? {};
  const toolSets: ToolSet[] = [];
  if (params.tools && params.tools.length > 0)
    toolSets.push(createToolSet({ name: "test", tools: params.tools }));
  toolSets.push(...(params.toolSets ?? []));
  let chatCount = 0;
  const agentParams: CreateAgentParams = {
    name: params.name ?? "tester",
    session: params.session ?? "s1",
    llm: client,
    model: "scripted-model",
    toolSets,
    options: {
      ...userOptions,
      onLog: (event) => {
        events.push(event);
        userOptions.onLog?.(event);
      },
      onMessageRecorded: (message) => {
        recorded.push(structuredClone(message));
        userOptions.onMessageRecorded?.(message);
      },
    },
    now: createTestClock(),
    createId: () => `chat-${++chatCount}`,
  };
  if (params.history) agentParams.history = params.history;
  if (params.journal) agentParams.journal = params.journal;
  if (params.tracing) agentParams.tracing = params.tracing;
  if (params.redactor) agentParams.redactor = params.redactor;
  if (params.post) agentParams.post = params.post;
  const agent = await createAgent(agentParams);
  return {
    agent,
    backend,
    client,
    events,
    recorded,
    eventsOf: <K extends EventKind>(kind: K) =>
      events.filter((event): event is EventOf<K> => event.kind === kind),
  };
}

/** A promise with its settle functions outside. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function createDeferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every pending promise job and I/O callback run once. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Settles until `condition` holds. A guard, not a timing assertion: it fails (instead of hanging
 * the suite) only when the condition has not held for `timeoutMs`.
 */
export async function waitUntil(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("waitUntil: the condition never held");
    await settle();
  }
}

/** One call of a {@link ControlledTool}: its arguments and the handles to finish it. */
export interface ControlledCall {
  args: Record<string, unknown>;
  context: ToolContext;
  resolve(result: string): void;
  reject(error: unknown): void;
}

/** A tool whose calls finish when the test says so, and which counts how many run at once. */
export interface ControlledTool {
  tool: Tool;
  /** Calls that started, in start order. */
  calls: ControlledCall[];
  /** Calls running now. */
  readonly running: number;
  /** The most that ever ran at once. */
  readonly maxRunning: number;
  /** The call whose `key` argument is `key`. */
  call(key: string): ControlledCall;
}

/** A tool taking `{ key: string }` whose executions the test settles one by one. */
export function createControlledTool(name: string, parameters: z.ZodType): ControlledTool {
  const calls: ControlledCall[] = [];
  let running = 0;
  let maxRunning = 0;
  const tool = defineTool({
    name,
    description: `A test tool (${name}) the test finishes by hand.`,
    parameters,
    execute: (args, context) => {
      running += 1;
      maxRunning = Math.max(maxRunning, running);
      const deferred = createDeferred<string>();
      calls.push({
        args: args as Record<string, unknown>,
        context,
        resolve: deferred.resolve,
        reject: deferred.reject,
      });
      return deferred.promise.finally(() => {
        running -= 1;
      });
    },
  });
  return {
    tool,
    calls,
    get running() {
      return running;
    },
    get maxRunning() {
      return maxRunning;
    },
    call(key) {
      const found = calls.find((call) => call.args.key === key);
      if (!found)
        throw new Error(`no call with key ${key} (started: ${calls.map((c) => c.args.key).join(", ")})`);
      return found;
    },
  };
}

/** A temporary folder for SQLite files; `cleanup()` closes what was opened and removes it. */
export function createTempHistories() {
  const directory = mkdtempSync(join(tmpdir(), "agentloop-agent-"));
  const path = join(directory, "agents.db");
  const opened: SqliteContextHistory[] = [];
  return {
    path,
    /** A history on the shared file, keyed by agent + session. */
    open(agent = "tester", session = "s1"): SqliteContextHistory {
      const history = new SqliteContextHistory({ path, agent, session });
      opened.push(history);
      return history;
    },
    cleanup(): void {
      for (const history of opened.splice(0)) history.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * Checks the invariant providers enforce: every assistant tool call is answered by a
 * tool message with its id, and no tool message answers a call that was not made.
 */
export function danglingToolCalls(messages: readonly Message[]): string[] {
  const answered = new Set(
    messages.flatMap((message) => (message.role === "tool" ? [message.toolCallId ?? "(no id)"] : [])),
  );
  const made = messages.flatMap((message) =>
    message.role === "assistant" ? (message.toolCalls ?? []).map((call) => call.id) : [],
  );
  const madeSet = new Set(made);
  return [
    ...made.filter((id) => !answered.has(id)).map((id) => `unanswered ${id}`),
    ...[...answered].filter((id) => !madeSet.has(id)).map((id) => `orphan result ${id}`),
  ];
}

import type { BudgetCheck } from "../../machines/chat.machine.js";
import type { Agent } from "../agent/agent-types.js";
import { createAgent } from "../agent/create-agent.js";
import type { Bus } from "../bus/bus.js";
import { type BusEventPublisher, createBusEventPublisher } from "../bus/event-publisher.js";
import { DEFAULT_PREFIX } from "../bus/subjects.js";
import { fenceHistory, fenceLlm } from "../cluster/lease-fence.js";
import type { ResolvedAgentDefinition } from "../config/agent-definitions.js";
import { type AgentDatabase, hasStoredSession, openAgentDatabase } from "../context/agent-database.js";
import type { ContextHistory } from "../context/context-history.js";
import { InMemoryContextHistory } from "../context/in-memory-history.js";
import { SqliteContextHistory } from "../context/sqlite-context-history.js";
import { ConfigurationError } from "../errors/configuration-error.js";
import { describeError } from "../errors/describe-error.js";
import { UnknownAgentError } from "../errors/unknown-agent-error.js";
import type { AgentEvent } from "../events/types.js";
import type { ChatJournal } from "../journal/chat-journal.js";
import { RecordsReadAhead } from "../journal/records-read-ahead.js";
import { SqliteChatJournal } from "../journal/sqlite-chat-journal.js";
import { createBackend, type ProviderEnvironment } from "../llm/create-backend.js";
import type { LlmClient } from "../llm/llm-client.js";
import { RetryingLlmClient } from "../llm/retrying-client.js";
import type { LlmBackend } from "../llm/types.js";
import type { McpServerPool } from "../mcp/mcp-server-pool.js";
import { captureContentFrom } from "../telemetry/agent-tracing.js";
import type { SecretRedactor } from "../text/secret-redactor.js";
import { createAskAgentToolSet } from "../tools/ask-agent.js";
import { createBuiltinToolSetRegistry, type ToolSetRegistry } from "../tools/builtin/index.js";
import { createShellToolSet, type ShellToolSetOptions } from "../tools/shell.js";
import type { ToolSet } from "../tools/tool-set.js";
import type { SessionAgentFactory } from "./session-factory.js";

export interface SessionAgentFactoryOptions {
  definitions: readonly ResolvedAgentDefinition[];
  /** Events go here (`<prefix>.events.<agent>.<session>.<Kind>`), and `ask_agent` asks through it. */
  bus: Bus;
  prefix?: string;
  /** SQLite file of the histories; without it histories live in this process's memory. */
  db?: string;
  /** Builds each session's history instead (e.g. on JetStream: `NatsHistoryStore.history`); `db` is then unused. */
  openHistory?: (agent: string, session: string) => ContextHistory;
  /** The host's id: every event carries it as `host`. */
  hostId?: string;
  /** Where provider keys and base URLs are read when a definition has none. */
  env?: ProviderEnvironment;
  /** Overrides the backend (tests: a scripted model). Default: {@link createBackend} from the definition. */
  createBackend?: (definition: ResolvedAgentDefinition) => LlmBackend;
  /** Builds the LLM client around a backend; default a {@link RetryingLlmClient}. */
  createClient?: (backend: LlmBackend) => LlmClient;
  /** Extra event listener besides the bus (e.g. a local logger). */
  onEvent?: (event: AgentEvent) => void;
  /** One-line notices: the first event that could not be published (the rest are counted). */
  log?: (line: string) => void;
  /** Settings of the opt-in `shell` ToolSet (an agent's `shellEnv` adds to its `passEnv`). */
  shell?: ShellToolSetOptions;
  /** Hides the configured secrets in tool results, events and chat errors. Default: none. */
  redactor?: SecretRedactor;
  /** `ask_agent` settings. */
  askAgent?: { timeoutMs?: number; maxDepth?: number; parentLeaseMs?: number };
  /**
   * Where sessions journal their unfinished work, so a chat cut off by a crash is resumed. Default: the history database's
   * `chat_journal_records` table when `db` is set, else none (in-memory histories die with the process).
   */
  journal?: ChatJournal;
  /** Asked as each chat starts (a tenant's token budget): see {@link CreateAgentParams.checkBudget}. */
  checkBudget?: () => BudgetCheck;
  /** The host's MCP servers: each agent gets the ToolSets of the servers it lists. */
  mcpServers?: McpServerPool;
  /** Injected for deterministic tests. */
  now?: () => Date;
  createId?: () => string;
}

/** The session factory plus what it holds open. */
export interface SessionAgentFactoryHandle {
  createAgent: SessionAgentFactory;
  /** The ToolSet names agents may list (built-ins, `ask_agent`, `shell`). */
  readonly toolNames: readonly string[];
  /** Where sessions journal their unfinished work, if anywhere (see `journal`). */
  readonly journal: ChatJournal | undefined;
  /** Events that could not be published on the bus, since the start (see {@link BusEventPublisher}). */
  readonly eventPublishFailures: number;
  /**
   * Whether a session was ever used: it has a history here (in memory or in the SQLite file).
   * `undefined` when histories live elsewhere (JetStream) and this factory cannot tell.
   */
  hasSession(agent: string, session: string): boolean | undefined;
  /** Closes the history database. Call after the host has closed. */
  close(): void;
}

/**
 * The registry of every ToolSet a host offers: the built-ins, `ask_agent` (over `bus`, else the
 * factory context's bus) and the opt-in `shell`. Without any bus, only building `ask_agent` fails,
 * so `createHostToolSetRegistry().names()` lists what an agents file may name.
 */
export function createHostToolSetRegistry(
  options: Partial<Pick<SessionAgentFactoryOptions, "bus" | "prefix" | "shell" | "askAgent">> & {
    peers?: readonly string[];
  } = {},
): ToolSetRegistry {
  return createBuiltinToolSetRegistry()
    .register("ask_agent", (context) => {
      const bus = options.bus ?? context.bus;
      if (bus === undefined) throw new ConfigurationError("ask_agent needs a bus to reach the other agents");
      return createAskAgentToolSet({
        bus,
        prefix: options.prefix ?? DEFAULT_PREFIX,
        ...(context.agent === undefined ? {} : { agent: context.agent }),
        ...(options.peers === undefined ? {} : { peers: options.peers }),
        ...(context.supervision === undefined ? {} : { supervision: context.supervision }),
        ...options.askAgent,
      });
    })
    .register("shell", (context) =>
      createShellToolSet({
        ...options.shell,
        passEnv: [...(options.shell?.passEnv ?? []), ...(context.shellEnv ?? [])],
      }),
    );
}

/**
 * Builds each session's agent from its definition: per agent, once, the LLM client and
 * the ToolSet templates (so a bad provider or tool name fails at start); per session, the history
 * (restored by the agent) and copies of the templates. Events go to the bus. Without a database the
 * histories stay in memory for the life of the process, so a passivated session still comes back
 * with its conversation.
 *
 * @throws ConfigurationError when an agent's provider cannot be built (e.g. no API key).
 */
export function createSessionAgentFactory(options: SessionAgentFactoryOptions): SessionAgentFactoryHandle {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const registry = createHostToolSetRegistry({
    ...options,
    peers: options.definitions.map((definition) => definition.name),
  });
  const { log } = options;
  const publish = createBusEventPublisher(options.bus, {
    prefix,
    // Once: a broken bus would repeat it for every token. The count goes on (the host's $SRV.STATS).
    onError: (error, event) => {
      if (publish.failures !== 1 || log === undefined) return;
      const reason = describeError(error);
      log(
        `could not publish a ${event.kind} event of ${event.agent}/${event.session}: ${reason}; further lost events are counted in $SRV.STATS (eventPublishFailures)`,
      );
    },
  });
  const { onEvent } = options;
  const onLog =
    onEvent === undefined
      ? publish
      : (event: AgentEvent) => {
          publish(event);
          onEvent(event);
        };

  const agents = new Map<
    string,
    { definition: ResolvedAgentDefinition; llm: LlmClient; toolSets: ToolSet[] }
  >();
  for (const definition of options.definitions) {
    const backend =
      options.createBackend?.(definition) ?? definition.backend ?? buildBackend(definition, options.env);
    const llm = options.createClient?.(backend) ?? new RetryingLlmClient({ backend });
    const toolSets = [
      ...registry.create(definition.tools, {
        agent: definition.name,
        bus: options.bus,
        ...(definition.shellEnv === undefined ? {} : { shellEnv: definition.shellEnv }),
        ...(definition.supervision === undefined ? {} : { supervision: definition.supervision }),
      }),
      ...(definition.toolSets ?? []),
      ...(options.mcpServers?.toolSetsFor(definition.name) ?? []),
    ];
    agents.set(definition.name, { definition, llm, toolSets });
  }

  let database: AgentDatabase | undefined;
  const memoryHistories = new Map<string, InMemoryContextHistory>();
  const historyOf = (agent: string, session: string): ContextHistory => {
    if (options.openHistory !== undefined) return options.openHistory(agent, session);
    if (options.db !== undefined) {
      database ??= openAgentDatabase(options.db);
      return new SqliteContextHistory({ agent, session, database });
    }
    const key = `${agent}/${session}`;
    let history = memoryHistories.get(key);
    if (history === undefined) {
      history = new InMemoryContextHistory();
      memoryHistories.set(key, history);
    }
    return history;
  };
  let journal = options.journal;
  const journalOf = (): ChatJournal | undefined => {
    if (journal === undefined && options.db !== undefined) {
      database ??= openAgentDatabase(options.db);
      journal = new SqliteChatJournal(database);
    }
    return journal;
  };

  const createSessionAgent: SessionAgentFactory = async (agent, session, hooks): Promise<Agent> => {
    const entry = agents.get(agent);
    if (entry === undefined) throw new UnknownAgentError(agent, [...agents.keys()]);
    const { definition, llm, toolSets } = entry;
    const sessionJournals = journalOf();
    return createAgent({
      name: agent,
      session,
      ...(options.hostId === undefined ? {} : { host: options.hostId }),
      // With a lease, history writes and model requests stop the moment it is lost.
      llm: fenceLlm(llm, hooks.fence),
      model: definition.model,
      toolSets,
      history: fenceHistory(historyOf(agent, session), hooks.fence),
      // The session's journal is read while its history is: an open waits for the longer read only.
      ...(sessionJournals === undefined
        ? {}
        : { journal: new RecordsReadAhead(sessionJournals, agent, session) }),
      post: hooks.post,
      ...(options.checkBudget === undefined ? {} : { checkBudget: options.checkBudget }),
      // The session's mailbox is its one queue.
      isOrderedByMailbox: true,
      ...(options.redactor === undefined ? {} : { redactor: options.redactor }),
      // Message content on spans is the operator's call, made in the host's environment.
      tracing: { captureContent: captureContentFrom(options.env ?? {}) },
      options: {
        tokenLimit: definition.contextWindow,
        onLog,
        ...(definition.systemPrompt === undefined ? {} : { systemPrompt: definition.systemPrompt }),
        ...(definition.maxIterations === undefined ? {} : { maxIterations: definition.maxIterations }),
        ...(definition.reasoningEffort === undefined ? {} : { reasoningEffort: definition.reasoningEffort }),
        ...(definition.promptCaching ? { promptCaching: true } : {}),
        ...(definition.needsApproval === undefined ? {} : { needsApproval: definition.needsApproval }),
        ...(definition.streamIdleTimeoutMs === undefined
          ? {}
          : { streamIdleTimeoutMs: definition.streamIdleTimeoutMs }),
      },
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(options.createId === undefined ? {} : { createId: options.createId }),
    });
  };

  return {
    createAgent: createSessionAgent,
    toolNames: registry.names(),
    get journal() {
      return journalOf();
    },
    get eventPublishFailures() {
      return publish.failures;
    },
    hasSession: (agent, session) => {
      if (options.openHistory !== undefined) return undefined;
      if (memoryHistories.has(`${agent}/${session}`)) return true;
      if (options.db === undefined) return false;
      database ??= openAgentDatabase(options.db);
      return hasStoredSession(database, agent, session);
    },
    close: () => {
      database?.close();
      database = undefined;
    },
  };
}

/** The agent's backend; a configuration problem names the agent (a host may serve several). */
function buildBackend(definition: ResolvedAgentDefinition, env: ProviderEnvironment | undefined): LlmBackend {
  try {
    return createBackend(backendConfig(definition), env);
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    throw new ConfigurationError(`agent "${definition.name}": ${error.message}`, { cause: error });
  }
}

function backendConfig(definition: ResolvedAgentDefinition) {
  return {
    provider: definition.provider,
    ...(definition.apiKey === undefined ? {} : { apiKey: definition.apiKey }),
    ...(definition.baseUrl === undefined ? {} : { baseUrl: definition.baseUrl }),
  };
}

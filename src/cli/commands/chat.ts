import { ChatCancelledError } from "../../agent/chat-errors.js";
import { createAgent } from "../../agent/create-agent.js";
import { LocalBus } from "../../bus/local-bus.js";
import { isValidName } from "../../bus/subjects.js";
import { isPromptCachingDefault } from "../../config/agent-definitions.js";
import { createHostId } from "../../config/host-id.js";
import { secretRedactorFor } from "../../config/runtime-config.js";
import { SqliteContextHistory } from "../../context/sqlite-context-history.js";
import { ConfigurationError } from "../../errors/configuration-error.js";
import { describeError } from "../../errors/describe-error.js";
import { startHostService } from "../../host/host-service.js";
import { createBackend } from "../../llm/create-backend.js";
import { RetryingLlmClient } from "../../llm/retrying-client.js";
import { builtinToolSets } from "../../tools/builtin/index.js";
import { type CliContext, type Command, UsageError } from "../cli-context.js";
import { chatThroughBus, runRemoteChat } from "./chat-remote.js";
import { createEventPrinter, EVENT_MODES, type EventMode } from "./event-printer.js";
import { loadAgentsFromFlags } from "./serve.js";

/** The tools a local agent gets: the built-ins that need no bus. */
export const LOCAL_TOOLS = ["todo_list", "current_time"];

export interface ChatArguments {
  agent: string;
  session: string;
  text: string;
  events: EventMode;
}

/** Reads and checks `chat`'s own arguments. */
export function parseChatArguments(context: CliContext): ChatArguments {
  const { flags, positionals } = context;
  const text = positionals.join(" ");
  if (text.trim() === "") throw new UsageError("chat needs a MESSAGE, e.g. agentloop chat --local 'hello'");
  const agent = typeof flags.agent === "string" ? flags.agent : "assistant";
  const session = typeof flags.session === "string" ? flags.session : "default";
  if (!isValidName(agent)) throw new UsageError(`--agent must match ^[A-Za-z0-9_-]{1,64}$, got "${agent}"`);
  if (!isValidName(session))
    throw new UsageError(`--session must match ^[A-Za-z0-9_-]{1,64}$, got "${session}"`);
  const events = flags.events ?? "none";
  if (typeof events !== "string" || !(EVENT_MODES as readonly string[]).includes(events)) {
    throw new UsageError(`--events must be jsonl, pretty or none, got "${String(events)}"`);
  }
  return { agent, session, text, events: events as EventMode };
}

/** `agentloop chat [--agent NAME] [--session ID] [--local] [--events jsonl|pretty|none] MESSAGE` */
export const chatCommand: Command = async (context) => {
  const hasAgents = context.flags.agents !== undefined || context.flags.config !== undefined;
  if (context.flags.local !== true) {
    if (hasAgents) {
      throw new UsageError(
        "--agents and --config go with --local (a remote chat talks to the agents its host serves)",
      );
    }
    return runRemoteChat(context, parseChatArguments(context));
  }
  if (hasAgents) return runLocalHostChat(context);
  return runLocalChat(context, parseChatArguments(context));
};

/**
 * `chat --local --agents FILE | --config FILE`: the file's agents served by a host in this process,
 * on the in-process bus, and the message sent to it as a remote chat would be. So an agent with
 * custom tools, approvals (asked on stdin), MCP servers or `ask_agent` peers can be tried without
 * NATS; `--db` keeps the conversation across runs as with `serve`.
 */
async function runLocalHostChat(context: CliContext): Promise<number> {
  const definitions = await loadAgentsFromFlags(context);
  const named = typeof context.flags.agent === "string";
  // Without --agent: `assistant` when the file has it, else the file's first agent.
  const agent =
    named || definitions.some((definition) => definition.name === "assistant")
      ? undefined
      : definitions[0]?.name;
  const args = parseChatArguments(
    agent === undefined ? context : { ...context, flags: { ...context.flags, agent } },
  );
  const definition = definitions.find((candidate) => candidate.name === args.agent);
  if (definition === undefined) {
    const file = String(context.flags.config ?? context.flags.agents);
    throw new UsageError(
      `no agent named "${args.agent}" in ${file} (it has: ${definitions.map((candidate) => candidate.name).join(", ")})`,
    );
  }
  if (definition.backend === undefined && definition.provider === "demo") {
    context.stderr.write(
      "agentloop: using the demo model (offline and deterministic; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one)\n",
    );
  }
  const bus = new LocalBus();
  try {
    const service = await startHostService({
      bus,
      definitions,
      config: context.config,
      env: context.env,
      log: (line) => context.stderr.write(`agentloop chat: ${line}\n`),
    });
    try {
      return await chatThroughBus(context, args, bus, "the in-process host");
    } finally {
      await service.close();
    }
  } finally {
    await bus.close();
  }
}

async function runLocalChat(context: CliContext, args: ChatArguments): Promise<number> {
  const { config } = context;
  const backend = createBackend(
    {
      provider: config.provider,
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
      ...(config.baseUrl ? { baseUrl: config.baseUrl } : {}),
    },
    context.env,
  );
  if (config.provider === "demo") {
    context.stderr.write(
      "agentloop: using the demo model (offline and deterministic; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one)\n",
    );
  }
  const history = config.db ? openHistory(config.db, args) : undefined;
  const printer = createEventPrinter(context, args.events);
  try {
    const agent = await createAgent({
      name: args.agent,
      session: args.session,
      host: createHostId(),
      llm: new RetryingLlmClient({ backend }),
      model: config.model,
      toolSets: builtinToolSets(LOCAL_TOOLS),
      ...(history ? { history } : {}),
      redactor: secretRedactorFor(config, context.env),
      options: {
        tokenLimit: config.contextWindow,
        ...(config.maxIterations !== undefined ? { maxIterations: config.maxIterations } : {}),
        ...(config.reasoningEffort !== undefined ? { reasoningEffort: config.reasoningEffort } : {}),
        ...(isPromptCachingDefault(config.provider) ? { promptCaching: true } : {}),
        ...(config.streamIdleTimeoutMs !== undefined
          ? { streamIdleTimeoutMs: config.streamIdleTimeoutMs }
          : {}),
        onLog: printer.onEvent,
      },
    });
    try {
      const { result, usage } = await agent.chat(args.text, { signal: context.signal });
      printer.onResult(result, usage);
      return 0;
    } catch (error) {
      if (error instanceof ChatCancelledError) {
        context.stderr.write("agentloop: cancelled\n");
        return 130;
      }
      throw error;
    }
  } finally {
    history?.close();
  }
}

function openHistory(path: string, args: ChatArguments): SqliteContextHistory {
  try {
    return new SqliteContextHistory({ path, agent: args.agent, session: args.session });
  } catch (error) {
    throw new ConfigurationError(`cannot open --db ${path}: ${describeError(error)}`);
  }
}

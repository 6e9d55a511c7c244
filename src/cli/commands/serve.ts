import { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { loadAgentDefinitions, type ResolvedAgentDefinition } from "../../host/agent-definitions.js";
import { createHostToolSetRegistry } from "../../host/create-session-agent.js";
import { describeAgents, startHostService } from "../../host/host-service.js";
import { type CliContext, type Command, UsageError } from "../cli-context.js";
import { untilAborted } from "../command-helpers.js";
import { DEFAULT_MODELS, idleTimeoutFrom, maxSessionsFrom, protocolSettingsFrom } from "../runtime-config.js";

/** `--agents FILE` read, validated and completed from the CLI configuration. */
export function loadAgentsFromFlags(context: CliContext): Promise<ResolvedAgentDefinition[]> {
  const { agents } = context.flags;
  if (agents === true || agents === "") throw new UsageError("--agents needs a FILE");
  return loadAgentDefinitions(typeof agents === "string" ? agents : undefined, context.config, {
    knownTools: createHostToolSetRegistry().names(),
    defaultModel: (provider) => DEFAULT_MODELS[provider],
  });
}

/**
 * `agentloop serve [--agents FILE]`: the agent host alone, on NATS (SPEC §12). Prints one line
 * naming the bus and the agents; on SIGINT / SIGTERM stops taking requests, lets running chats
 * finish (up to the grace period) and exits 0.
 */
export const serveCommand: Command = async (context) => {
  const { config } = context;
  const definitions = await loadAgentsFromFlags(context);
  // Every flag is checked before connecting: a typo is a usage error, not a NATS problem.
  const idleTimeoutMs = idleTimeoutFrom(context.flags, context.env);
  const maxSessions = maxSessionsFrom(context.flags, context.env);
  const protocol = protocolSettingsFrom(context.flags, context.env);
  const url = redactNatsUrl(config.natsUrl);
  let bus: NatsBus;
  try {
    bus = await NatsBus.connect({
      url: config.natsUrl,
      name: "agentloop serve",
      ...(config.natsCreds === undefined ? {} : { credsFile: config.natsCreds }),
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    context.stderr.write(
      `agentloop serve: cannot reach NATS at ${url}: ${reason} (start nats-server -js, or run \`agentloop up\` for an in-process bus)\n`,
    );
    return 1;
  }
  try {
    const log = (line: string) => context.stderr.write(`agentloop serve: ${line}\n`);
    const service = await startHostService({
      bus,
      definitions,
      config,
      env: context.env,
      log,
      ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
      ...(maxSessions === undefined ? {} : { maxSessions }),
      protocol,
    });
    context.stdout.write(
      `agentloop serve: bus ${url} (nats, prefix ${config.prefix}); agents: ${describeAgents(definitions)}\n`,
    );
    await untilAborted(context.signal);
    context.stderr.write("agentloop serve: stopping: finishing running chats\n");
    await service.close();
    return 0;
  } finally {
    await bus.close();
  }
};

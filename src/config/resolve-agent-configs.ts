import { ConfigurationError } from "../errors/configuration-error.js";
import { describeError } from "../errors/describe-error.js";
import { createToolSet } from "../tools/create-tool-set.js";
import type { Tool } from "../tools/define-tool.js";
import type { ToolSet } from "../tools/tool-set.js";
import type { AgentloopConfig } from "./agent-config.js";
import { isToolSet } from "./agent-config.js";
import {
  type AgentDefinition,
  type ResolveAgentsOptions,
  type ResolvedAgentDefinition,
  resolveAgentDefinitions,
} from "./agent-definitions.js";
import type { RuntimeConfig } from "./runtime-config.js";

/** A validated configuration (the output of the {@link AgentloopConfig} schema). */
type ParsedConfig = ReturnType<typeof AgentloopConfig.parse>;

/**
 * Completes validated agents in code like an agents file's (unset fields from the CLI
 * configuration), keeping what only code gives: each agent's ToolSets and single tools (gathered
 * into one ToolSet named after the agent) and its backend.
 *
 * @throws ConfigurationError naming the field (`agents[1].tools[0]: …`).
 */
export function resolveAgentConfigs(
  config: ParsedConfig,
  runtime: RuntimeConfig,
  options: ResolveAgentsOptions,
): ResolvedAgentDefinition[] {
  const known = new Set(options.knownTools);
  const codeTools = config.agents.map((agent, index) => {
    const names: string[] = [];
    const toolSets: ToolSet[] = [];
    const tools: Tool[] = [];
    for (const [toolIndex, entry] of (agent.tools ?? []).entries()) {
      if (typeof entry === "string") {
        if (!known.has(entry)) {
          throw new ConfigurationError(
            `agents[${index}].tools[${toolIndex}]: unknown tool set "${entry}" (known: ${[...known].join(", ")})`,
          );
        }
        names.push(entry);
      } else if (isToolSet(entry)) toolSets.push(entry);
      else tools.push(entry);
    }
    if (tools.length > 0) {
      try {
        toolSets.push(createToolSet({ name: `${agent.name}_tools`, tools }));
      } catch (error) {
        // Two tools of the same name: the model could not tell them apart.
        const reason = describeError(error);
        throw new ConfigurationError(`agents[${index}].tools: ${reason}`, { cause: error });
      }
    }
    return { names, toolSets };
  });
  // The agents-file fields resolve exactly as an agents file's do; what only code gives is put back after.
  const definitions = config.agents.map(
    ({ backend: _backend, streamIdleTimeoutMs: _timeout, tools, ...fields }, index): AgentDefinition => ({
      ...fields,
      ...(tools === undefined ? {} : { tools: codeTools[index]?.names ?? [] }),
    }),
  );
  const resolved = resolveAgentDefinitions({ agents: definitions }, runtime, options);
  return resolved.map((definition, index) => {
    const agent = config.agents[index];
    const toolSets = codeTools[index]?.toolSets ?? [];
    return {
      ...definition,
      ...(toolSets.length > 0 ? { toolSets } : {}),
      ...(agent?.backend === undefined ? {} : { backend: agent.backend }),
      ...(agent?.streamIdleTimeoutMs === undefined ? {} : { streamIdleTimeoutMs: agent.streamIdleTimeoutMs }),
    };
  });
}

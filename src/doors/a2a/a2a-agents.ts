import type { Bus } from "../../bus/bus.js";
import type { ResolvedAgentDefinition } from "../../config/agent-definitions.js";
import { createHostToolSetRegistry } from "../../host/create-session-agent.js";

/** What the A2A door tells about one agent in its Agent Card. */
export interface A2aAgentProfile {
  name: string;
  description: string;
  /** One skill per tool the agent may call. */
  skills: { id: string; name: string; description: string }[];
}

/**
 * The agents' profiles from their definitions (the agents file every host of a system shares):
 * the tools of each tool set it names, and of the tool sets built in code. A tool set that cannot
 * be built without a host (e.g. one that needs the bus) becomes one skill named after it.
 */
export function profilesFromDefinitions(
  definitions: readonly ResolvedAgentDefinition[],
  bus?: Bus,
): A2aAgentProfile[] {
  const registry = createHostToolSetRegistry();
  return definitions.map((definition) => {
    const skills: A2aAgentProfile["skills"] = [];
    for (const name of definition.tools) {
      try {
        const [set] = registry.create([name], bus === undefined ? {} : { bus });
        for (const tool of set?.tools() ?? []) skills.push(skillOf(tool.name, tool.description));
      } catch {
        skills.push(skillOf(name, `the ${name} tools`));
      }
    }
    for (const set of definition.toolSets ?? []) {
      for (const tool of set.tools()) skills.push(skillOf(tool.name, tool.description));
    }
    for (const server of Object.keys(definition.mcpServers ?? {})) {
      skills.push(skillOf(`${server}__*`, `the tools of the MCP server ${server}`));
    }
    return {
      name: definition.name,
      description: `agentloop agent ${definition.name} (${definition.provider} ${definition.model})`,
      skills,
    };
  });
}

function skillOf(name: string, description: string): A2aAgentProfile["skills"][number] {
  return { id: name, name, description: description === "" ? name : description };
}

import type { z } from "zod";

/**
 * The refinement an agents list shares wherever it is parsed (a config file, an agents file,
 * `startHost`'s options): each name once, the repeat reported at its own `agents[i].name`.
 */
export function checkUniqueAgentNames(
  agents: ReadonlyArray<{ name: string }>,
  context: z.RefinementCtx,
): void {
  const seen = new Set<string>();
  agents.forEach((agent, index) => {
    if (seen.has(agent.name)) {
      context.addIssue({
        code: "custom",
        path: ["agents", index, "name"],
        message: `duplicate agent "${agent.name}"`,
      });
    }
    seen.add(agent.name);
  });
}

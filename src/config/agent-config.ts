import { z } from "zod";
import type { LlmBackend } from "../llm/types.js";
import type { Tool } from "../tools/define-tool.js";
import type { ToolSet } from "../tools/tool-set.js";
import { AgentDefinition } from "./agent-definitions.js";
import { checkUniqueAgentNames } from "./unique-agent-names.js";

/** A ToolSet from any copy of this package (checked by shape: a config file may import another copy). */
export function isToolSet(value: unknown): value is ToolSet {
  if (typeof value !== "object" || value === null) return false;
  const set = value as Record<string, unknown>;
  return (
    typeof set.name === "string" &&
    ["tools", "invoke", "prompt", "iterationPromptInjection", "copy", "reset"].every(
      (method) => typeof set[method] === "function",
    )
  );
}

/** A tool from {@link defineTool} (checked by shape, like {@link isToolSet}). */
export function isTool(value: unknown): value is Tool {
  if (typeof value !== "object" || value === null) return false;
  const tool = value as { definition?: { name?: unknown }; invoke?: unknown };
  return typeof tool.definition?.name === "string" && typeof tool.invoke === "function";
}

/** What `scriptedModel()` returns, seen by shape: a client in front of the backend that plays the script. */
interface ScriptedModelLike {
  readonly scripted: LlmBackend;
}

/** The backend itself, or the one a scripted model holds (it is a client, not a backend). */
function backendOf(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const scripted = (value as { scripted?: unknown }).scripted;
  return isLlmBackend(scripted) ? scripted : value;
}

function isLlmBackend(value: unknown): value is LlmBackend {
  if (typeof value !== "object" || value === null) return false;
  const backend = value as Record<string, unknown>;
  return typeof backend.generate === "function" && typeof backend.generateStream === "function";
}

/** One entry of an agent's `tools`: a built-in ToolSet's name, a ToolSet, or a single tool. */
export const ToolEntry = z.union([z.string().min(1), z.custom<ToolSet>(isToolSet), z.custom<Tool>(isTool)], {
  error: "must be a built-in tool set name, a ToolSet (createToolSet) or a tool (defineTool)",
});

/**
 * One agent in code (`defineConfig`, `startHost`): every field of an agents-file entry, plus what
 * only code can give. New per-agent fields go into {@link AgentDefinition} (the agents file) and
 * show up here too; fields that need code (functions, objects) go into the `extend` below.
 */
export const AgentConfig = AgentDefinition.extend({
  /**
   * Built-in ToolSet names (`"todo_list"`, `"current_time"`, `"ask_agent"`, `"shell"`), ToolSets
   * from `createToolSet`, and tools from `defineTool`, in any mix.
   * @defaultValue `["todo_list", "current_time", "ask_agent"]` (the built-ins an agents file gets)
   */
  tools: z.array(ToolEntry).optional(),
  /**
   * A model backend in code, e.g. `scriptedModel([...])` or `new ScriptedBackend([...])` from
   * `agentloop/testing`; `provider` and `baseUrl` are then unused. The host puts its own retrying
   * client in front, so a scripted model gives its backend (its faults are retried as a provider's).
   */
  backend: z
    .custom<LlmBackend | ScriptedModelLike>((value) => isLlmBackend(backendOf(value)), {
      error: "must be an LlmBackend (generate and generateStream) or a scriptedModel(...)",
    })
    .transform((value) => backendOf(value) as LlmBackend)
    .optional(),
  /** A model stream silent this long (ms) once started fails. @defaultValue the CLI's `--stream-idle-timeout`, else 120_000 */
  streamIdleTimeoutMs: z
    .number()
    .int()
    .min(1)
    .max(2 ** 31 - 1)
    .optional(),
});
/** One agent as written in code: see {@link AgentConfig}'s schema for the fields. */
export type AgentConfig = z.input<typeof AgentConfig>;

/** What `agentloop.config.js` exports by default: `{ agents: [ … ] }`, names unique. */
export const AgentloopConfig = z
  .object({ agents: z.array(AgentConfig).min(1, { error: "must list at least one agent" }) })
  .strict()
  .superRefine((config, context) => checkUniqueAgentNames(config.agents, context));
/** The configuration a config file exports (see {@link defineConfig}). */
export type AgentloopConfig = z.input<typeof AgentloopConfig>;

/**
 * Types a configuration for `agentloop serve --config` / `up --config`, or for `startHost`'s
 * `agents`: it returns its argument, so an editor checks each agent's fields as you write them.
 * The agents take every field of an agents file, and `tools` may list tools and ToolSets built in
 * code besides built-in names. The CLI validates the file when it loads it.
 *
 * @param config `{ agents: [ … ] }`: at least one agent, names unique.
 * @returns `config`, unchanged.
 *
 * @example
 * ```ts
 * // agentloop.config.js (or .ts, compiled)
 * import { defineConfig, defineTool, z } from "agentloop";
 *
 * const orderStatus = defineTool({
 *   name: "order_status",
 *   description: "Looks up an order's status.",
 *   parameters: z.object({ orderId: z.string() }),
 *   execute: async ({ orderId }) => ({ orderId, status: "shipped" }),
 * });
 *
 * export default defineConfig({
 *   agents: [
 *     {
 *       name: "support",
 *       systemPrompt: "You answer questions about orders.",
 *       provider: "anthropic",
 *       model: "claude-sonnet-4-5",
 *       tools: [orderStatus, "current_time"],
 *       maxIterations: 10,
 *     },
 *   ],
 * });
 * ```
 */
export function defineConfig(config: AgentloopConfig): AgentloopConfig {
  return config;
}

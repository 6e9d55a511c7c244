import { readFile } from "node:fs/promises";
import { z } from "zod";
import { NAME_PATTERN } from "../bus/subjects.js";
import { ConfigurationError } from "../errors/configuration-error.js";
import { describeError } from "../errors/describe-error.js";
import { knownContextWindow, ProviderName } from "../llm/create-backend.js";
import type { LlmBackend, ReasoningEffort } from "../llm/types.js";
import { findMcpServerConflicts, McpServers } from "../mcp/mcp-server-config.js";
import type { SupervisionPolicy } from "../tools/ask-agent.js";
import type { ToolSet } from "../tools/tool-set.js";
import { plainIssueMessage } from "./plain-issue.js";
import type { RuntimeConfig } from "./runtime-config.js";
import { TenantsSection } from "./tenant-limits.js";
import { checkUniqueAgentNames } from "./unique-agent-names.js";

/** The agent a host serves when no agents file is given. */
export const DEFAULT_AGENT_NAME = "assistant";

/** The built-in ToolSets the default agent gets; `shell` is opt-in, never a default. */
export const DEFAULT_AGENT_TOOLS: readonly string[] = ["todo_list", "current_time", "ask_agent"];

/** One agent in an agents file. Unknown fields are refused: they are usually typos. */
export const AgentDefinition = z
  .object({
    name: z.string().regex(NAME_PATTERN, { error: `must match ${NAME_PATTERN.source}` }),
    systemPrompt: z.string().min(1).optional(),
    provider: ProviderName.optional(),
    model: z.string().min(1).optional(),
    baseUrl: z.url().optional(),
    tools: z.array(z.string().min(1)).optional(),
    maxIterations: z.number().int().min(1).max(1000).optional(),
    reasoningEffort: z.enum(["low", "medium", "high"]).optional(),
    contextWindow: z.number().int().min(1).optional(),
    /** Host environment variables the `shell` tool's commands may see, besides PATH, HOME and the locale. */
    shellEnv: z
      .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" }))
      .optional(),
    /** Anthropic prompt caching (a cache breakpoint on the last message). @defaultValue true for anthropic, else false */
    promptCaching: z.boolean().optional(),
    /** MCP servers whose tools the agent gets as `<server>__<tool>` (see src/mcp/mcp-server-config.ts). */
    mcpServers: McpServers.optional(),
    /** Names of tools (not tool sets) whose every call a person must approve first. */
    needsApproval: z
      .array(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { error: "must be a tool name" }))
      .optional(),
    /**
     * Who may decide the agent's tool approvals. `selfApprove: true` lets the sender of an Agent
     * Protocol prompt answer the approval `query` of its own chat; by default only an approver
     * (someone who may use the control subject) decides.
     */
    approval: z.object({ selfApprove: z.boolean().optional() }).strict().optional(),
    /**
     * What the agent does when an agent it asked (`ask_agent`) fails: `"report"` (the default) gives
     * the model a typed tool error; `{ "retry": n, "backoffMs": ms }` asks again up to n times
     * (waiting ms, doubling) before reporting; `"fail"` fails the agent's own chat with the asked
     * agent's failure. A cycle, the depth cap or a refusal is never retried nor fatal.
     */
    onChildFailure: z
      .union([
        z.literal("report"),
        z.literal("fail"),
        z
          .object({
            retry: z.number().int().min(1).max(10),
            backoffMs: z.number().int().min(0).max(60_000).optional(),
          })
          .strict(),
      ])
      .optional(),
  })
  .strict();
export type AgentDefinition = z.infer<typeof AgentDefinition>;

/** The agents file: `{ "agents": [ … ] }`, names unique. */
export const AgentsFile = z
  .object({
    agents: z.array(AgentDefinition).min(1, { error: "must list at least one agent" }),
    /** Limits per tenant (see src/config/tenant-limits.ts); who is served is up to the NATS accounts. */
    tenants: TenantsSection.optional(),
  })
  .strict()
  .superRefine((file, context) => {
    checkUniqueAgentNames(file.agents, context);
    for (const conflict of findMcpServerConflicts(file.agents)) {
      context.addIssue({
        code: "custom",
        path: ["agents", conflict.agentIndex, "mcpServers", conflict.server],
        message: conflict.message,
      });
    }
  });
export type AgentsFile = z.infer<typeof AgentsFile>;

/** An agent with every setting decided: the file's values, else the CLI's. */
export interface ResolvedAgentDefinition {
  name: string;
  /** Undefined: the agent's default prompt. */
  systemPrompt?: string;
  provider: ProviderName;
  model: string;
  /** Undefined: the provider's SDK environment (`ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`). */
  baseUrl?: string;
  /** Undefined: the provider's key variable (`ANTHROPIC_API_KEY` / `OPENAI_API_KEY`). */
  apiKey?: string;
  tools: string[];
  maxIterations?: number;
  reasoningEffort?: ReasoningEffort;
  /** The token limit the compaction ratio is measured against. */
  contextWindow: number;
  /** Variables passed to the `shell` tool's commands (see `SHELL_BASE_ENV` for the ones always passed). */
  shellEnv?: string[];
  /** Anthropic prompt caching: the file's switch, else on for anthropic (other providers ignore it). */
  promptCaching?: boolean;
  /** Tools whose calls wait for a person's approval (the control subject's `approve` / `deny`). */
  needsApproval?: string[];
  /** The sender of an Agent Protocol prompt may answer its own chat's approval queries. */
  selfApprove?: boolean;
  /** What `ask_agent` does when the asked agent fails (its agents-file `onChildFailure`); undefined: report. */
  supervision?: SupervisionPolicy;
  /** From the CLI (`--stream-idle-timeout`); undefined: the backends' default. */
  streamIdleTimeoutMs?: number;
  /** ToolSets built in code (a config file, `startHost`), after the built-ins named in `tools`. */
  toolSets?: ToolSet[];
  /** A model backend built in code; overrides `provider`. */
  backend?: LlmBackend;
  /** The MCP servers whose tools the agent gets (the host runs them). */
  mcpServers?: McpServers;
}

/** A bad agents file: the message names the file and the field. */
export class AgentDefinitionsError extends ConfigurationError {
  readonly path: string;

  constructor(path: string, reason: string, options: { cause?: unknown } = {}) {
    super(`agents file ${path}: ${reason}`, options);
    this.path = path;
  }
}

export interface ResolveAgentsOptions {
  /** ToolSet names agents may use (a registry's names); others are refused. */
  knownTools: readonly string[];
  /** The model to use when an agent switches provider without naming one (the CLI's per-provider default). */
  defaultModel?: (provider: ProviderName) => string | undefined;
}

/**
 * Reads and validates the `--agents` file, filling unset fields from the CLI configuration. With no
 * path: one agent `assistant` with all built-in tools.
 *
 * @throws AgentDefinitionsError naming the path and the field when the file is unreadable or wrong.
 */
export async function loadAgentDefinitions(
  path: string | undefined,
  config: RuntimeConfig,
  options: ResolveAgentsOptions,
): Promise<ResolvedAgentDefinition[]> {
  if (path === undefined) {
    return resolveAgentDefinitions(
      { agents: [{ name: DEFAULT_AGENT_NAME, tools: [...DEFAULT_AGENT_TOOLS] }] },
      config,
      {
        ...options,
        knownTools: [...options.knownTools, ...DEFAULT_AGENT_TOOLS],
      },
    );
  }
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : describeError(error);
    throw new AgentDefinitionsError(path, `cannot be read (${reason})`, { cause: error });
  }
  return parseAgentDefinitions(text, path, config, options);
}

/**
 * ` (line L, column C)` where `JSON.parse` stopped, or nothing. Never V8's own message: it quotes
 * the text around the error, and an agents file may hold a key there.
 */
function whereJsonFailed(error: unknown, text: string): string {
  const position = /at position (\d+)/.exec(describeError(error))?.[1];
  if (position !== undefined) {
    const before = text.slice(0, Number(position));
    const line = before.split("\n").length;
    return ` (line ${line}, column ${before.length - before.lastIndexOf("\n")})`;
  }
  const lineColumn = /\(line (\d+) column (\d+)\)/.exec(describeError(error));
  return lineColumn === null ? "" : ` (line ${lineColumn[1]}, column ${lineColumn[2]})`;
}

/** {@link loadAgentDefinitions} for text already read (`source` names it in errors). */
export function parseAgentDefinitions(
  text: string,
  source: string,
  config: RuntimeConfig,
  options: ResolveAgentsOptions,
): ResolvedAgentDefinition[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new AgentDefinitionsError(source, `is not valid JSON${whereJsonFailed(error, text)}`, {
      cause: error,
    });
  }
  const parsed = AgentsFile.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AgentDefinitionsError(source, issue === undefined ? "invalid" : describeIssue(issue), {
      cause: parsed.error,
    });
  }
  try {
    return resolveAgentDefinitions(parsed.data, config, options);
  } catch (error) {
    if (error instanceof ConfigurationError)
      throw new AgentDefinitionsError(source, error.message, { cause: error });
    throw error;
  }
}

/**
 * Fills each agent's unset fields from the CLI configuration. The CLI's key and base URL only apply
 * to agents on the CLI's provider: another provider's come from its own environment variables.
 */
export function resolveAgentDefinitions(
  file: AgentsFile,
  config: RuntimeConfig,
  options: ResolveAgentsOptions,
): ResolvedAgentDefinition[] {
  const known = new Set(options.knownTools);
  return file.agents.map((agent, index) => {
    for (const [toolIndex, tool] of (agent.tools ?? []).entries()) {
      if (!known.has(tool)) {
        throw new ConfigurationError(
          `agents[${index}].tools[${toolIndex}]: unknown tool set "${tool}" (known: ${[...known].join(", ")})`,
        );
      }
    }
    const provider = agent.provider ?? config.provider;
    const sameProvider = provider === config.provider;
    const model = agent.model ?? (sameProvider ? config.model : options.defaultModel?.(provider));
    if (model === undefined || model === "") {
      throw new ConfigurationError(
        `agents[${index}].model: agent "${agent.name}" uses provider ${provider} (the CLI uses ${config.provider}): name its model`,
      );
    }
    const contextWindow =
      agent.contextWindow ??
      (agent.model === undefined ? undefined : knownContextWindow(agent.model)) ??
      config.contextWindow;
    const baseUrl = agent.baseUrl ?? (sameProvider ? config.baseUrl : undefined);
    const apiKey = sameProvider ? config.apiKey : undefined;
    const maxIterations = agent.maxIterations ?? config.maxIterations;
    const reasoningEffort = agent.reasoningEffort ?? config.reasoningEffort;
    const { streamIdleTimeoutMs } = config;
    const promptCaching = agent.promptCaching ?? isPromptCachingDefault(provider);
    return {
      name: agent.name,
      provider,
      model,
      tools: agent.tools ?? [...DEFAULT_AGENT_TOOLS],
      contextWindow,
      ...(promptCaching ? { promptCaching } : {}),
      ...(agent.systemPrompt === undefined ? {} : { systemPrompt: agent.systemPrompt }),
      ...(baseUrl === undefined ? {} : { baseUrl }),
      ...(apiKey === undefined ? {} : { apiKey }),
      ...(maxIterations === undefined ? {} : { maxIterations }),
      ...(reasoningEffort === undefined ? {} : { reasoningEffort }),
      ...(agent.shellEnv === undefined ? {} : { shellEnv: agent.shellEnv }),
      ...(agent.mcpServers === undefined ? {} : { mcpServers: agent.mcpServers }),
      ...(agent.needsApproval === undefined ? {} : { needsApproval: agent.needsApproval }),
      ...(agent.approval?.selfApprove === true ? { selfApprove: true } : {}),
      ...(agent.onChildFailure === undefined ? {} : { supervision: supervisionOf(agent.onChildFailure) }),
      ...(streamIdleTimeoutMs === undefined ? {} : { streamIdleTimeoutMs }),
    };
  });
}

/**
 * Prompt caching is on by default where the provider needs it asked for: Anthropic caches only up
 * to an explicit breakpoint (OpenAI caches on its own, so the switch means nothing there).
 */
export function isPromptCachingDefault(provider: ProviderName): boolean {
  return provider === "anthropic";
}

/** `agents[1].tools[0]: <message>`: a zod issue as one line naming the field. */
export function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.reduce<string>((text, key) => {
    if (typeof key === "number") return `${text}[${key}]`;
    return text === "" ? String(key) : `${text}.${String(key)}`;
  }, "");
  if (issue.code === "unrecognized_keys") {
    const where = field === "" ? "" : `${field}: `;
    return `${where}unknown field${issue.keys.length === 1 ? "" : "s"} ${issue.keys.map((key) => `"${key}"`).join(", ")}`;
  }
  const message = plainIssueMessage(issue);
  return field === "" ? `the top level ${message}` : `${field}: ${message}`;
}

/** Default wait before the first retry of an asked agent that failed (doubling after). */
const DEFAULT_RETRY_BACKOFF_MS = 500;

function supervisionOf(policy: NonNullable<AgentDefinition["onChildFailure"]>): SupervisionPolicy {
  if (policy === "report") return { kind: "report" };
  if (policy === "fail") return { kind: "fail" };
  return { kind: "retry", times: policy.retry, backoffMs: policy.backoffMs ?? DEFAULT_RETRY_BACKOFF_MS };
}

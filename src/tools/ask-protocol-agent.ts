import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import type { Bus } from "../bus/bus.js";
import { NatsBus } from "../bus/nats-bus.js";
import { describeError } from "../errors/describe-error.js";
import {
  AgentNoRespondersError,
  AgentProtocolError,
  AgentServiceError,
  AgentStreamTimeoutError,
  askProtocolAgent,
} from "../protocol/agent-client.js";
import { describeAgent } from "../protocol/discovery.js";
import { isProtocolToken } from "../protocol/protocol-subjects.js";
import { AgentCallError, ToolCancelledError, ToolError } from "./tool-errors.js";
import { TOOL_RESULT_LIMIT } from "./tool-runner.js";

const TOOL_NAME = "ask_agent";

const Token = z
  .string()
  .refine(isProtocolToken, { error: "one subject token: no dots, wildcards or spaces" });

/** `ask_agent`'s `target`: an agent on the NATS agent protocol, found by discovery. */
export const ProtocolTarget = z
  .object({
    agent: Token.optional().describe(
      'Its harness identifier (the "agent" it registered), e.g. "claude-code".',
    ),
    owner: Token.optional().describe("Who runs it (its owner / namespace)."),
    name: Token.optional().describe("Its instance or session name."),
  })
  .describe(
    "Instead of agent: any agent speaking the NATS agent protocol (other frameworks, other hosts), found by discovery. Give what you know of agent / owner / name; it must match exactly one agent (the error lists the agents found when it matches none or several).",
  );
export type ProtocolTarget = z.infer<typeof ProtocolTarget>;

/** How `ask_agent` reaches protocol agents. */
export interface ProtocolCallSettings {
  /** The NATS connection; default the bus's when it is a {@link NatsBus}. */
  connection?: NatsConnection;
  /** How long discovery collects replies at most (default 2 s). */
  discoveryWindowMs?: number;
  /** A reply stream silent this long fails (default 60 s). */
  inactivityMs?: number;
  /** Headers sent with the prompt (the asked chat's lineage and trace parent). */
  headers?: Record<string, string>;
}

/**
 * `ask_agent` with a `target`: discovers the protocol agent, prompts it with `message` and returns
 * its streamed answer, cut to the tool result limit. Its questions mid-stream are refused (there is
 * no human behind an agent's tool call). Failures become tool errors the model can read.
 */
export async function askProtocolTarget(
  bus: Bus,
  target: ProtocolTarget,
  message: string,
  signal: AbortSignal,
  settings: ProtocolCallSettings = {},
): Promise<string> {
  const connection = settings.connection ?? (bus instanceof NatsBus ? bus.connection : undefined);
  if (connection === undefined) {
    throw new ToolError(
      "protocol agents (target) are reachable over NATS only, and this host runs on its in-process bus",
      { toolName: TOOL_NAME },
    );
  }
  try {
    const answer = await askProtocolAgent(connection, {
      target,
      message,
      signal,
      maxChars: TOOL_RESULT_LIMIT,
      ...(settings.discoveryWindowMs === undefined
        ? {}
        : { discovery: { windowMs: settings.discoveryWindowMs } }),
      ...(settings.inactivityMs === undefined ? {} : { inactivityMs: settings.inactivityMs }),
      ...(settings.headers === undefined ? {} : { headers: settings.headers }),
    });
    return answer.text === "" ? `(${describeAgent(answer.agent)} answered with no text)` : answer.text;
  } catch (error) {
    if (signal.aborted) throw new ToolCancelledError(TOOL_NAME);
    throw protocolToolError(error);
  }
}

function protocolToolError(error: unknown): ToolError {
  const options = { toolName: TOOL_NAME, cause: error };
  if (error instanceof AgentServiceError) {
    const message = `the agent could not answer (${error.status}): ${error.description}`;
    if (error.reason === "cycle") return new AgentCallError("cycle", message, options);
    if (error.status === 403) return new AgentCallError("denied", message, options);
    if (error.status === 404 || error.status === 429)
      return new AgentCallError("unavailable", message, options);
    return new AgentCallError("agent_failed", message, options);
  }
  if (error instanceof AgentStreamTimeoutError || error instanceof AgentNoRespondersError) {
    return new AgentCallError("unavailable", `${error.message}: it may have stopped`, options);
  }
  if (error instanceof AgentProtocolError) return new ToolError(error.message, options);
  const reason = describeError(error);
  return new ToolError(`asking the protocol agent failed: ${reason}`, options);
}

import { type Message, type Part, Role, type Task, TaskState } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { z } from "zod";
import { describeError } from "../errors/describe-error.js";
import { AgentCallError, ToolCancelledError, ToolError } from "./tool-errors.js";
import { TOOL_RESULT_LIMIT } from "./tool-runner.js";

const TOOL_NAME = "ask_agent";

/** `ask_agent`'s `target` for an A2A agent: the URL of its Agent Card. */
export const A2aTarget = z
  .object({
    a2a: z
      .url({ protocol: /^https?$/, error: "the http(s) URL of an A2A Agent Card" })
      .describe(
        "The URL of the agent's A2A Agent Card, e.g. https://example.com/.well-known/agent-card.json",
      ),
  })
  .strict()
  .describe("Instead of agent: any agent speaking A2A (Agent2Agent), reached through its Agent Card.");
export type A2aTarget = z.infer<typeof A2aTarget>;

/** How `ask_agent` reaches A2A agents. */
export interface A2aCallSettings {
  /** The fetch the client uses (tests, proxies); default the global one. */
  fetch?: typeof fetch;
  /** Between two reads of a task the agent left working (default 1 s). */
  pollIntervalMs?: number;
}

/** The states after which a task changes no more, or waits for something `ask_agent` cannot give. */
const SETTLED = new Set<TaskState>([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);

/**
 * `ask_agent` with `target: { a2a: "<agent card URL>" }`: reads the card, sends `message` with the
 * A2A SDK's client (the card's preferred binding, JSON-RPC or HTTP+JSON) in context `contextId`
 * (so one caller's questions share a conversation), waits for the task to end and returns its
 * answer, cut to the tool result limit. A task that asks for input is cancelled and reported: there
 * is no person behind an agent's tool call. Failures become tool errors the model can read.
 */
export async function askA2aTarget(
  target: A2aTarget,
  message: string,
  contextId: string,
  signal: AbortSignal,
  settings: A2aCallSettings = {},
): Promise<string> {
  const fetchImpl = settings.fetch ?? fetch;
  let client: Client;
  try {
    client = await new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }).createFromUrl(target.a2a, "");
  } catch (error) {
    if (signal.aborted) throw new ToolCancelledError(TOOL_NAME);
    // Typed, so the agent's supervision policy can retry it: the agent may be back in a moment.
    throw new AgentCallError(
      "unavailable",
      `cannot use the A2A agent card at ${target.a2a}: ${describeError(error)}`,
      { toolName: TOOL_NAME, cause: error },
    );
  }
  try {
    const result = await client.sendMessage(
      {
        tenant: "",
        message: userMessage(message, contextId),
        configuration: undefined,
        metadata: undefined,
      },
      { signal },
    );
    if ("messageId" in result) return cut(textOf(result.parts));
    const task = await untilSettled(client, result, signal, settings.pollIntervalMs ?? 1_000);
    return answerOf(client, task, signal);
  } catch (error) {
    if (signal.aborted) throw new ToolCancelledError(TOOL_NAME);
    if (error instanceof ToolError) throw error;
    throw new AgentCallError(
      "unavailable",
      `asking the A2A agent at ${target.a2a} failed: ${describeError(error)}`,
      { toolName: TOOL_NAME, cause: error },
    );
  }
}

function userMessage(text: string, contextId: string): Message {
  return {
    messageId: crypto.randomUUID(),
    contextId,
    taskId: "",
    role: Role.ROLE_USER,
    parts: [
      { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** A task the agent answered before it settled (it may answer at once) is read again until it does. */
async function untilSettled(
  client: Client,
  task: Task,
  signal: AbortSignal,
  intervalMs: number,
): Promise<Task> {
  let current = task;
  while (!SETTLED.has(current.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED)) {
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal.reason);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      }, intervalMs);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    current = await client.getTask({ tenant: "", id: current.id }, { signal });
  }
  return current;
}

async function answerOf(client: Client, task: Task, signal: AbortSignal): Promise<string> {
  const state = task.status?.state;
  const said = textOf(task.status?.message?.parts ?? []);
  if (state === TaskState.TASK_STATE_COMPLETED) {
    const artifacts = task.artifacts.map((artifact) => textOf(artifact.parts)).filter((text) => text !== "");
    const answer = artifacts.length > 0 ? artifacts.join("\n") : said;
    return cut(answer === "" ? "(the A2A agent completed the task with no text)" : answer);
  }
  if (state === TaskState.TASK_STATE_INPUT_REQUIRED || state === TaskState.TASK_STATE_AUTH_REQUIRED) {
    // Nobody can answer it from here: the task is not left waiting.
    await client.cancelTask({ tenant: "", id: task.id, metadata: undefined }, { signal }).catch(() => {});
    const what = state === TaskState.TASK_STATE_INPUT_REQUIRED ? "input" : "authentication";
    throw new ToolError(
      `the A2A agent asked for ${what} that ask_agent cannot give${said === "" ? "" : `: ${said}`}`,
      {
        toolName: TOOL_NAME,
      },
    );
  }
  const how =
    state === TaskState.TASK_STATE_CANCELED
      ? "cancelled"
      : state === TaskState.TASK_STATE_REJECTED
        ? "rejected"
        : "failed";
  // A rejected task is the agent's refusal (asking again changes nothing); a failed or cancelled
  // one is its failure, which the asking agent's supervision policy may retry.
  throw new AgentCallError(
    state === TaskState.TASK_STATE_REJECTED ? "denied" : "agent_failed",
    `the A2A agent's task ${how}${said === "" ? "" : `: ${said}`}`,
    { toolName: TOOL_NAME },
  );
}

function textOf(parts: readonly Part[]): string {
  return parts
    .flatMap((part) => {
      const content = part.content;
      if (content?.$case === "text") return [content.value];
      if (content?.$case === "data") return [JSON.stringify(content.value)];
      return [];
    })
    .join("\n");
}

function cut(text: string): string {
  return text.length <= TOOL_RESULT_LIMIT ? text : `${text.slice(0, TOOL_RESULT_LIMIT)}…[truncated]`;
}

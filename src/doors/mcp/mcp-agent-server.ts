import { randomUUID } from "node:crypto";
import type { TaskMessageQueue } from "@modelcontextprotocol/sdk/experimental/tasks";
import { InMemoryTaskMessageQueue } from "@modelcontextprotocol/sdk/experimental/tasks";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  type CreateTaskResult,
  ElicitResultSchema,
  ErrorCode,
  ListToolsRequestSchema,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { Bus } from "../../bus/bus.js";
import type { ChatReply } from "../../bus/contract.js";
import { NAME_PATTERN } from "../../bus/subjects.js";
import { describeIssues } from "../../ui/ui-requests.js";
import { VERSION } from "../../version.js";
import type { AgentCatalog } from "./agent-catalog.js";
import { AgentTaskStore } from "./agent-task-store.js";
import { type ApprovalRequest, chatOverBus, decideToolCall } from "./bus-chat.js";

/** How long a finished task's result is kept when the client asks for no TTL: an hour. */
const DEFAULT_TASK_TTL_MS = 60 * 60_000;
/** How often a client should poll a running task. */
const TASK_POLL_INTERVAL_MS = 1_000;
/** How long an approval question waits for the user's answer before the call is left to an approver. */
const ELICITATION_TIMEOUT_MS = 10 * 60_000;

/** The arguments of every agent tool. */
export const AgentToolInput = z.strictObject({
  message: z.string().min(1, { error: "must not be empty" }),
  session: z
    .string()
    .regex(NAME_PATTERN, { error: `must match ${NAME_PATTERN.source}` })
    .optional(),
});
export type AgentToolInput = z.infer<typeof AgentToolInput>;

const INPUT_SCHEMA: Tool["inputSchema"] = {
  type: "object",
  properties: {
    message: { type: "string", minLength: 1, description: "What to say to the agent." },
    session: {
      type: "string",
      pattern: NAME_PATTERN.source,
      description:
        "The conversation to continue (the `session` of an earlier answer); a new one when left out.",
    },
  },
  required: ["message"],
  additionalProperties: false,
};

const OUTPUT_SCHEMA: NonNullable<Tool["outputSchema"]> = {
  type: "object",
  properties: {
    agent: { type: "string" },
    session: { type: "string", description: "Pass it back as `session` to continue this conversation." },
    result: { type: "string", description: "The agent's answer." },
    usage: {
      type: "object",
      description: "Tokens the chat's model requests used, all together.",
      properties: {
        prompt: { type: "number" },
        completion: { type: "number" },
        total: { type: "number" },
        cached: { type: "number" },
      },
      required: ["prompt", "completion", "total", "cached"],
    },
  },
  required: ["agent", "session", "result", "usage"],
};

/** What every MCP connection of one door shares: where the agents are, and the tasks. */
export interface McpAgentServerOptions {
  bus: Bus;
  prefix: string;
  catalog: AgentCatalog;
  /** Shared by every connection of a door, so a task outlives the request that created it. */
  taskStore?: AgentTaskStore;
  taskQueue?: TaskMessageQueue;
  /** New session names for calls without `session`. */
  createSession?: () => string;
  chatTimeoutMs?: number;
}

type CallExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * The MCP server side of agentloop: one tool per agent of the system, named after it, input
 * `{ message, session? }`, answering the agent's text with `{ agent, session, result, usage }` as
 * structured content. A call is one chat through the bus contract, so it works against any host.
 *
 * - **Tasks** (the SDK's experimental Tasks support): a `tools/call` with `task` answers at once
 *   with a task; `tasks/get` shows `working`, `input_required` while a tool call of the chat waits
 *   for approval, then `completed` / `failed`; `tasks/result` gives the tool result; `tasks/cancel`
 *   cancels that chat on its host (not the session's other chats). Without `task` the call simply
 *   waits for the answer.
 * - **Approvals**: a held tool call is asked with an elicitation (`approve` / `deny`, a reason) when
 *   the client supports elicitation; the answer is sent as the control `approve` / `deny` bound to
 *   that call and its arguments. In a task the question travels through `tasks/result` and the task
 *   shows `input_required` meanwhile. A client without elicitation (or one that dismisses the
 *   question) leaves the call to an approver (the UI, or the control subject); a task says so in
 *   its `statusMessage`.
 * - **Errors**: an unknown tool (no such agent) or bad arguments are MCP errors (`-32602`); a chat
 *   that fails (model error, cancelled, host gone) is a tool result with `isError` and the reason.
 */
export function createMcpAgentServer(options: McpAgentServerOptions): Server {
  const taskStore = options.taskStore ?? new AgentTaskStore();
  const server = new Server(
    { name: "agentloop", version: VERSION },
    {
      capabilities: {
        tools: { listChanged: false },
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      taskStore,
      taskMessageQueue: options.taskQueue ?? new InMemoryTaskMessageQueue(),
      instructions:
        "Each tool is an agentloop agent. Call it with `message`; pass the `session` of an answer back to continue that conversation.",
    },
  );
  const createSession = options.createSession ?? (() => `mcp-${randomUUID()}`);

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: (await options.catalog.list()).map(toolOf),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const agent = request.params.name;
    if (!(await options.catalog.has(agent))) {
      const known = await options.catalog.list();
      throw invalidParams(
        `unknown tool "${agent}": no agent of that name (agents: ${known.length === 0 ? "none" : known.join(", ")})`,
      );
    }
    const input = request.params.arguments ?? {};
    const parsed = AgentToolInput.safeParse(input);
    if (!parsed.success) {
      throw invalidParams(`invalid arguments for tool "${agent}": ${describeIssues(parsed.error, input)}`);
    }
    const session = parsed.data.session ?? createSession();
    const chat = { agent, session, text: parsed.data.message };
    const taskParams = request.params.task;
    if (taskParams === undefined || extra.taskStore === undefined) {
      return toToolResult(chat, await runChat(chat, extra, undefined));
    }
    const task = await extra.taskStore.createTask({
      ttl: taskParams.ttl ?? DEFAULT_TASK_TTL_MS,
      pollInterval: TASK_POLL_INTERVAL_MS,
    });
    void runTask(chat, task.taskId, extra);
    const created: CreateTaskResult = { task };
    return created;
  });

  /** A chat as a task: its result (or failure) is stored when it ends, unless it was cancelled. */
  async function runTask(chat: Chat, taskId: string, extra: CallExtra): Promise<void> {
    const stopper = new AbortController();
    const forget = taskStore.onCancelled(taskId, () => stopper.abort());
    try {
      const reply = await runChat(chat, { ...extra, signal: stopper.signal }, taskId);
      const result = toToolResult(chat, reply);
      await extra.taskStore?.storeTaskResult(
        taskId,
        result.isError === true ? "failed" : "completed",
        result,
      );
    } catch {
      // Cancelled (a terminal task takes no result) or its session gone: nothing waits for it.
    } finally {
      forget();
    }
  }

  async function runChat(chat: Chat, extra: CallExtra, taskId: string | undefined): Promise<ChatReply> {
    const questions = new Map<string, AbortController>();
    const setStatus = (status: "working" | "input_required", message?: string) => {
      if (taskId === undefined) return;
      extra.taskStore?.updateTaskStatus(taskId, status, message).catch(() => {});
    };
    const ask = async (approval: ApprovalRequest): Promise<void> => {
      const call = `${approval.toolName}(${approval.arguments})`;
      const canAsk = server.getClientCapabilities()?.elicitation !== undefined;
      if (!canAsk) {
        setStatus(
          "input_required",
          `${call} waits for an approver: approve or deny tool call ${approval.toolCallId} in the UI or on the control subject`,
        );
        return;
      }
      const question = new AbortController();
      questions.set(approval.toolCallId, question);
      try {
        const answer = await extra.sendRequest(
          {
            method: "elicitation/create",
            params: {
              mode: "form",
              message: `Agent "${chat.agent}" wants to run ${call}. Approve it?`,
              requestedSchema: {
                type: "object",
                properties: {
                  decision: { type: "string", title: "Decision", enum: ["approve", "deny"] },
                  reason: { type: "string", title: "Reason (told to the agent when you deny)" },
                },
                required: ["decision"],
              },
            },
          },
          ElicitResultSchema,
          {
            timeout: ELICITATION_TIMEOUT_MS,
            signal: question.signal,
            ...(taskId === undefined ? {} : { relatedTask: { taskId } }),
          },
        );
        if (answer.action === "cancel") {
          setStatus("input_required", `${call} waits for an approver (the question was dismissed)`);
          return;
        }
        const content = answer.content ?? {};
        const approved = answer.action === "accept" && content.decision === "approve";
        const reason =
          typeof content.reason === "string" && content.reason !== ""
            ? content.reason
            : approved
              ? undefined
              : "denied by the MCP client's user";
        await decideToolCall(options.bus, options.prefix, chat.agent, {
          session: chat.session,
          toolCallId: approval.toolCallId,
          arguments: approval.arguments,
          approved,
          ...(reason === undefined ? {} : { reason }),
        });
      } catch {
        // Decided elsewhere (the question was withdrawn), unanswered in time, or the client went
        // away: the call stays with whoever approves it next.
      } finally {
        questions.delete(approval.toolCallId);
      }
    };
    return chatOverBus({
      bus: options.bus,
      prefix: options.prefix,
      agent: chat.agent,
      session: chat.session,
      text: chat.text,
      signal: extra.signal,
      ...(options.chatTimeoutMs === undefined ? {} : { timeoutMs: options.chatTimeoutMs }),
      onApprovalRequested: (approval) => void ask(approval),
      onApprovalResolved: (toolCallId) => {
        questions.get(toolCallId)?.abort(new Error("decided elsewhere"));
        setStatus("working");
      },
    });
  }

  return server;
}

interface Chat {
  agent: string;
  session: string;
  text: string;
}

function toolOf(agent: string): Tool {
  return {
    name: agent,
    title: `agentloop agent ${agent}`,
    description: `Chat with the agentloop agent "${agent}": it answers \`message\` (running its own tools), in the conversation \`session\` when given.`,
    inputSchema: INPUT_SCHEMA,
    outputSchema: OUTPUT_SCHEMA,
    execution: { taskSupport: "optional" },
  };
}

/** The chat's answer as a tool result; a failed chat is an `isError` result naming its code. */
function toToolResult(chat: Chat, reply: ChatReply): CallToolResult {
  if (!reply.ok) {
    return {
      content: [{ type: "text", text: `${reply.error.code}: ${reply.error.message}` }],
      isError: true,
    };
  }
  return {
    content: [{ type: "text", text: reply.result }],
    structuredContent: {
      agent: chat.agent,
      session: reply.session,
      result: reply.result,
      usage: reply.usage,
    },
  };
}

/**
 * An MCP `-32602` error whose wire message is the reason alone. The SDK's McpError puts "MCP error
 * -32602: " in front of its message and the server sends that message as it is, so a client that
 * adds the prefix itself (the SDK's Client does) would show it twice.
 */
function invalidParams(reason: string): Error & { code: number } {
  return Object.assign(new Error(reason), { code: ErrorCode.InvalidParams });
}

import { z } from "zod";
import type { Agent } from "../agent/agent-types.js";
import { ChatCancelledError, ChatFailedError } from "../agent/chat-errors.js";
import type { EventOf } from "../events/types.js";
import { ContextLengthExceededError } from "../llm/errors.js";
import { createToolSet } from "../tools/create-tool-set.js";
import { defineTool } from "../tools/define-tool.js";
import { AgentCallError } from "../tools/tool-errors.js";
import type { AgentPath, AgentPathRun } from "./agent-path.js";

/**
 * The built-in paths of {@link exploreAgentPaths}, by name. Each run gets fresh tools:
 * - `toolTurn`: the model calls a tool, then answers.
 * - `finalTurn`: the last allowed iteration is a final turn without tools.
 * - `toolError`: a tool throws and an unknown tool is called; the model answers the errors.
 * - `cancel`: the chat is cancelled while a tool runs.
 * - `compaction`: an answer over the compaction ratio compacts the context, then `/compact` does.
 * - `compactionFailure`: the summary comes back empty, then the summary request fails; the chat
 *   goes on uncompacted and `/compact` reports false.
 * - `streamRetry`: the stream is cut mid-answer and retried.
 * - `modelError`: the provider keeps failing; the chat fails.
 * - `contextOverflow`: the prompt is over the model's window; the chat compacts and goes on.
 * - `childFailure`: a tool fails in a way that ends the chat (an asked agent failing under the
 *   `fail` supervision policy) while another call of the batch still runs; the chat fails with
 *   that error and the model is not asked again.
 * - `approval`: a tool that needs approval is called; on its ToolApprovalRequested the path
 *   approves it (`agent.decideToolCall`), the tool runs and the model answers.
 * - `approvalDenied`: the same call is denied with a reason; the tool never runs and the model
 *   sees `{"error":"denied","reason":...}` as its result, then answers.
 */
export function builtinAgentPaths(): Record<string, AgentPath> {
  const paths: AgentPath[] = [
    path("toolTurn", () => ({
      script: [{ toolCalls: [{ name: "echo", arguments: { text: "ping" } }] }, { text: "pong" }],
      toolSets: [echoTools()],
      drive: async (agent) => expectResult(agent, "pong"),
    })),
    path("finalTurn", () => ({
      script: [{ toolCalls: [{ name: "echo", arguments: { text: "ping" } }] }, { text: "final" }],
      toolSets: [echoTools()],
      options: { maxIterations: 2 },
      drive: async (agent, model) => {
        await expectResult(agent, "final");
        const last = model.requests.at(-1)?.options;
        if (last?.tools !== undefined && last.toolChoice !== "none") {
          throw new Error("finalTurn: the last request still offered tools");
        }
      },
    })),
    path("toolError", () => ({
      script: [
        {
          toolCalls: [
            { name: "fail", arguments: {} },
            { name: "no_such_tool", arguments: {} },
          ],
        },
        { text: "recovered" },
      ],
      toolSets: [echoTools()],
      drive: async (agent) => expectResult(agent, "recovered"),
    })),
    path("cancel", () => {
      let started!: () => void;
      const isStarted = new Promise<void>((resolve) => {
        started = resolve;
      });
      const wait = defineTool({
        name: "wait",
        description: "Waits until the chat is cancelled.",
        parameters: z.object({}),
        execute: (_args, context) =>
          new Promise<string>((_resolve, reject) => {
            context.signal.addEventListener("abort", () => reject(new Error("cancelled")), { once: true });
            started();
          }),
      });
      return {
        script: [{ toolCalls: [{ name: "wait", arguments: {} }] }],
        toolSets: [createToolSet({ name: "explore-cancel", tools: [wait] })],
        drive: async (agent) => {
          const controller = new AbortController();
          const chat = agent.chat("wait for me", { signal: controller.signal });
          await isStarted;
          controller.abort();
          await expectRejection(chat, ChatCancelledError, "cancel");
        },
      };
    }),
    path("compaction", () => ({
      script: [
        { text: "a long answer", usage: { prompt: 900, completion: 10 } },
        { text: "summary of the chat" },
        { text: "summary on request" },
      ],
      options: { tokenLimit: 1000, contextCompactRatio: 0.5 },
      drive: async (agent) => {
        await expectResult(agent, "a long answer");
        if (!(await agent.compact("the topic"))) throw new Error("compaction: /compact did not compact");
      },
    })),
    path("compactionFailure", () => ({
      script: [
        { text: "a long answer", usage: { prompt: 900, completion: 10 } },
        { text: "   " },
        { fault: "server_error" },
        { fault: "server_error" },
        { fault: "server_error" },
      ],
      options: { tokenLimit: 1000, contextCompactRatio: 0.5 },
      drive: async (agent) => {
        await expectResult(agent, "a long answer");
        if (await agent.compact())
          throw new Error("compactionFailure: /compact compacted on a failing model");
      },
    })),
    path("streamRetry", () => ({
      script: [{ fault: "disconnect_after", deltas: ["par", "tial"], afterDeltas: 1 }, { text: "whole" }],
      drive: async (agent) => expectResult(agent, "whole"),
    })),
    path("modelError", () => ({
      script: [{ fault: "server_error" }, { fault: "server_error" }, { fault: "server_error" }],
      drive: async (agent) => expectRejection(agent.chat("hello"), ChatFailedError, "modelError"),
    })),
    path("contextOverflow", () => ({
      script: [
        { text: "first" },
        { error: new ContextLengthExceededError("prompt is too long") },
        { text: "summary of the first chat" },
        { text: "second" },
      ],
      drive: async (agent) => {
        await expectResult(agent, "first");
        await expectResult(agent, "second");
      },
    })),
    path("childFailure", () => ({
      script: [
        {
          toolCalls: [
            { name: "wait", arguments: {} },
            { name: "ask_child", arguments: {} },
          ],
        },
        { text: "never asked" },
      ],
      toolSets: [childFailureTools()],
      drive: async (agent, model) => {
        await expectRejection(agent.chat("delegate"), ChatFailedError, "childFailure");
        if (model.requests.length !== 1) throw new Error("childFailure: the model was asked again");
      },
    })),
    path("approval", () => approvalRun("approval", { approved: true })),
    path("approvalDenied", () => approvalRun("approvalDenied", { approved: false, reason: "not today" })),
  ];
  return Object.fromEntries(paths.map((entry) => [entry.name, entry]));
}

function path(name: string, prepare: () => AgentPathRun): AgentPath {
  return { name, prepare };
}

/**
 * A call of `deploy` (which needs approval) that the path decides as soon as the chat announces
 * it; the chat's own event listener sees the announcement, so any agent built from the setup works.
 */
function approvalRun(name: string, decision: { approved: boolean; reason?: string }): AgentPathRun {
  const runs: string[] = [];
  const deploy = defineTool({
    name: "deploy",
    description: "Deploys to an environment.",
    parameters: z.object({ env: z.string() }),
    needsApproval: true,
    execute: ({ env }) => {
      runs.push(env);
      return `deployed to ${env}`;
    },
  });
  const answer = decision.approved ? "deployed" : "not deployed";
  return {
    script: [{ toolCalls: [{ name: "deploy", arguments: { env: "prod" } }] }, { text: answer }],
    toolSets: [createToolSet({ name: "explore-approval", tools: [deploy] })],
    drive: async (agent, model) => {
      if (agent.decideToolCall === undefined) throw new Error(`${name}: the agent cannot decide tool calls`);
      let requested!: (event: EventOf<"ToolApprovalRequested">) => void;
      const isRequested = new Promise<EventOf<"ToolApprovalRequested">>((resolve) => {
        requested = resolve;
      });
      const chat = agent.chat("deploy to prod", {
        onEvent: (event) => {
          if (event.kind === "ToolApprovalRequested") requested(event);
        },
      });
      const request = await Promise.race([
        isRequested,
        chat.then(() => {
          throw new Error(`${name}: the chat ended without asking for approval`);
        }),
      ]);
      if (runs.length > 0) throw new Error(`${name}: the tool ran before it was decided`);
      const outcome = await agent.decideToolCall({
        toolCallId: request.toolCallId,
        arguments: request.arguments,
        ...decision,
      });
      if (!outcome.ok) throw new Error(`${name}: the decision was refused: ${outcome.message}`);
      const { result } = await chat;
      if (result !== answer) throw new Error(`${name}: expected the answer "${answer}", got "${result}"`);
      if (decision.approved) {
        if (runs.join() !== "prod") throw new Error(`${name}: the approved tool did not run once`);
        return;
      }
      if (runs.length > 0) throw new Error(`${name}: the denied tool ran`);
      const seen = model.requests.at(-1)?.messages.at(-1);
      const denial = JSON.stringify({ error: "denied", reason: decision.reason });
      if (seen?.role !== "tool" || seen.content !== denial) {
        throw new Error(`${name}: the model did not see the denial ${denial}`);
      }
    },
  };
}

/**
 * `ask_child` fails as `ask_agent` does when the agent it asked failed and the policy is `fail`;
 * `wait` runs until the chat is stopped (so the failure ends a batch still in flight).
 */
function childFailureTools() {
  return createToolSet({
    name: "explore-child-failure",
    tools: [
      defineTool({
        name: "ask_child",
        description: "Asks a child agent that fails.",
        parameters: z.object({}),
        execute: () => {
          throw new AgentCallError("agent_failed", "the asked agent child/s1 failed", {
            toolName: "ask_child",
            failsChat: true,
          });
        },
      }),
      defineTool({
        name: "wait",
        description: "Waits until the chat is stopped.",
        parameters: z.object({}),
        execute: (_args, context) =>
          new Promise<string>((_resolve, reject) => {
            context.signal.addEventListener("abort", () => reject(new Error("stopped")), { once: true });
          }),
      }),
    ],
  });
}

/** `echo` returns its text; `fail` always throws. */
function echoTools() {
  return createToolSet({
    name: "explore",
    tools: [
      defineTool({
        name: "echo",
        description: "Returns its text.",
        parameters: z.object({ text: z.string() }),
        execute: ({ text }) => text,
      }),
      defineTool({
        name: "fail",
        description: "Always fails.",
        parameters: z.object({}),
        execute: () => {
          throw new Error("the tool failed on purpose");
        },
      }),
    ],
  });
}

async function expectResult(agent: Agent, expected: string): Promise<void> {
  const { result } = await agent.chat("hello");
  if (result !== expected) throw new Error(`expected the answer "${expected}", got "${result}"`);
}

async function expectRejection(
  chat: Promise<unknown>,
  errorClass: new (...args: never[]) => Error,
  name: string,
): Promise<void> {
  try {
    await chat;
  } catch (error) {
    if (error instanceof errorClass) return;
    throw new Error(`${name}: the chat rejected with ${String(error)}, not a ${errorClass.name}`);
  }
  throw new Error(`${name}: the chat resolved instead of rejecting with a ${errorClass.name}`);
}

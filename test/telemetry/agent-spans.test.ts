import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { AuthenticationError, ContextLengthExceededError, ServerError } from "../../src/llm/errors.js";
import {
  captureContentFrom,
  createAgentTracing,
  registeredTracer,
} from "../../src/telemetry/agent-tracing.js";
import { CAPTURE_CONTENT_ENV } from "../../src/telemetry/gen-ai-conventions.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createControlledTool, createTestAgent, waitUntil } from "../support/agent-harness.js";

/**
 * OpenTelemetry: a chat is traced as `invoke_agent <agent>` → `iteration` → `chat <model>`
 * / `execute_tool <tool>` (and `compaction` → `chat <model>`), with the GenAI semantic-convention
 * attributes; a stream reset is recorded on its model request; content only when switched on.
 */

let exporter: InMemorySpanExporter;
let provider: BasicTracerProvider;

beforeEach(() => {
  exporter = new InMemorySpanExporter();
  provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  vi.stubEnv(CAPTURE_CONTENT_ENV, "");
});

afterEach(async () => {
  vi.unstubAllEnvs();
  trace.disable();
  await provider.shutdown();
});

const lookup = defineTool({
  name: "lookup",
  description: "Looks a key up.",
  parameters: z.object({ key: z.string() }),
  execute: ({ key }) => `value of ${key}`,
});

/** The spans as an indented tree of names, children in the order they started. */
function tree(spans: readonly ReadableSpan[]): string[] {
  const byStart = [...spans].sort(
    (a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1],
  );
  const lines: string[] = [];
  const walk = (parentId: string | undefined, depth: number) => {
    for (const span of byStart.filter((candidate) => candidate.parentSpanContext?.spanId === parentId)) {
      lines.push(`${"  ".repeat(depth)}${span.name}`);
      walk(span.spanContext().spanId, depth + 1);
    }
  };
  walk(undefined, 0);
  return lines;
}

function spansNamed(name: string): ReadableSpan[] {
  return exporter
    .getFinishedSpans()
    .filter((span) => span.name === name)
    .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
}

function only(name: string): ReadableSpan {
  const found = spansNamed(name);
  expect(found, name).toHaveLength(1);
  return found[0]!;
}

function parentOf(span: ReadableSpan): ReadableSpan | undefined {
  const id = span.parentSpanContext?.spanId;
  return exporter.getFinishedSpans().find((candidate) => candidate.spanContext().spanId === id);
}

const CONTENT_KEYS = [
  "gen_ai.input.messages",
  "gen_ai.output.messages",
  "gen_ai.system_instructions",
  "gen_ai.tool.call.arguments",
  "gen_ai.tool.call.result",
  "agentloop.compaction.topic",
];

/** Two tool calls after one retryable reset, an answer, then a compaction (the context is over 0.7). */
async function runTracedChat(captureContent?: boolean) {
  const harness = await createTestAgent({
    script: [
      { deltas: ["Let me"], failAfterDeltas: 1, error: new ServerError("overloaded") },
      {
        text: "Looking both up.",
        toolCalls: [
          { name: "lookup", arguments: { key: "a" } },
          { name: "lookup", arguments: { key: "b" } },
        ],
        usage: { prompt: 100, completion: 20, cached: 60 },
      },
      { text: "Both found.", usage: { prompt: 150, completion: 10 } },
      { text: "Summary: a and b were looked up.", usage: { prompt: 170, completion: 8 } },
    ],
    tools: [lookup],
    options: { tokenLimit: 200 },
    tracing: {
      tracer: provider.getTracer("agentloop-test"),
      ...(captureContent === undefined ? {} : { captureContent }),
    },
  });
  const result = await harness.agent.chat("look up a and b");
  return { ...harness, result };
}

describe("OpenTelemetry spans", () => {
  it("a chat with two tool calls, a reset and a compaction: the span tree", async () => {
    const { result } = await runTracedChat();
    expect(result.result).toBe("Both found.");

    const spans = exporter.getFinishedSpans();
    expect(tree(spans)).toEqual([
      "invoke_agent tester",
      "  iteration",
      "    chat scripted-model",
      "    execute_tool lookup",
      "    execute_tool lookup",
      "  iteration",
      "    chat scripted-model",
      "  compaction",
      "    chat scripted-model",
    ]);
    expect(new Set(spans.map((span) => span.spanContext().traceId)).size).toBe(1);
    expect(spans.every((span) => span.ended)).toBe(true);
    expect(spans.filter((span) => span.status.code === SpanStatusCode.ERROR)).toEqual([]);
  });

  it("the GenAI attributes: agent, model, provider, usage, finish reasons, tools; the retry on its request", async () => {
    await runTracedChat();

    const chat = only("invoke_agent tester");
    expect(chat.kind).toBe(SpanKind.INTERNAL);
    expect(chat.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "tester",
      "gen_ai.conversation.id": "s1",
      "gen_ai.provider.name": "scripted",
      "gen_ai.request.model": "scripted-model",
      "agentloop.chat.id": "chat-1",
      // The chat's usage is the sum over its requests, the summary's included.
      "gen_ai.usage.input_tokens": 100 + 150 + 170,
      "gen_ai.usage.output_tokens": 20 + 10 + 8,
      "gen_ai.usage.cache_read.input_tokens": 60,
    });

    const iterations = spansNamed("iteration");
    expect(iterations.map((span) => span.attributes)).toEqual([
      { "agentloop.iteration": 1, "agentloop.iteration.final": false },
      { "agentloop.iteration": 2, "agentloop.iteration.final": false },
    ]);

    const requests = spansNamed("chat scripted-model");
    expect(requests.map((span) => parentOf(span)?.name)).toEqual(["iteration", "iteration", "compaction"]);
    for (const request of requests) {
      expect(request.kind).toBe(SpanKind.CLIENT);
      expect(request.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted-model",
        "gen_ai.conversation.id": "s1",
      });
    }
    const [withTools, answer, summary] = requests;
    expect(withTools!.attributes).toMatchObject({
      "gen_ai.response.finish_reasons": ["tool_calls"],
      "gen_ai.usage.input_tokens": 100,
      "gen_ai.usage.output_tokens": 20,
      "gen_ai.usage.cache_read.input_tokens": 60,
      "agentloop.model.retries": 1,
    });
    expect(withTools!.events.map((event) => ({ name: event.name, attributes: event.attributes }))).toEqual([
      {
        name: "agentloop.stream.reset",
        attributes: {
          "agentloop.attempt": 1,
          "agentloop.reset.reason": "server_error",
          "error.type": "ServerError",
        },
      },
    ]);
    expect(withTools!.status.code).toBe(SpanStatusCode.UNSET);
    expect(answer!.attributes).toMatchObject({
      "gen_ai.response.finish_reasons": ["stop"],
      "gen_ai.usage.input_tokens": 150,
      "gen_ai.usage.output_tokens": 10,
      "agentloop.model.retries": 0,
    });
    expect(answer!.events).toEqual([]);
    expect(summary!.attributes).toMatchObject({
      "gen_ai.usage.input_tokens": 170,
      "gen_ai.usage.output_tokens": 8,
    });

    const tools = spansNamed("execute_tool lookup");
    expect(
      tools
        .map((span) => span.attributes)
        .sort((a, b) => String(a["gen_ai.tool.call.id"]).localeCompare(String(b["gen_ai.tool.call.id"]))),
    ).toEqual([
      {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "call_2_1",
        "gen_ai.tool.type": "function",
      },
      {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "call_2_2",
        "gen_ai.tool.type": "function",
      },
    ]);
    expect(tools.map((span) => parentOf(span)?.attributes["agentloop.iteration"])).toEqual([1, 1]);
  });

  it("records no prompt, completion, tool arguments or results by default", async () => {
    await runTracedChat();
    const keys = exporter.getFinishedSpans().flatMap((span) => Object.keys(span.attributes));
    expect(keys.filter((key) => CONTENT_KEYS.includes(key))).toEqual([]);
  });

  it(`records them as GenAI messages when asked to (${CAPTURE_CONTENT_ENV}=true in the given environment)`, async () => {
    await runTracedChat(captureContentFrom({ [CAPTURE_CONTENT_ENV]: " TRUE " }));

    const chat = only("invoke_agent tester");
    expect(JSON.parse(String(chat.attributes["gen_ai.input.messages"]))).toEqual([
      { role: "user", parts: [{ type: "text", content: "look up a and b" }] },
    ]);
    expect(JSON.parse(String(chat.attributes["gen_ai.output.messages"]))).toEqual([
      { role: "assistant", parts: [{ type: "text", content: "Both found." }], finish_reason: "stop" },
    ]);

    const [withTools, answer] = spansNamed("chat scripted-model");
    expect(JSON.parse(String(withTools!.attributes["gen_ai.system_instructions"]))).toEqual([
      { type: "text", content: "You are a helpful assistant." },
    ]);
    expect(JSON.parse(String(withTools!.attributes["gen_ai.input.messages"]))).toEqual([
      { role: "user", parts: [{ type: "text", content: "look up a and b" }] },
    ]);
    expect(JSON.parse(String(withTools!.attributes["gen_ai.output.messages"]))).toEqual([
      {
        role: "assistant",
        parts: [
          { type: "text", content: "Looking both up." },
          { type: "tool_call", id: "call_2_1", name: "lookup", arguments: { key: "a" } },
          { type: "tool_call", id: "call_2_2", name: "lookup", arguments: { key: "b" } },
        ],
        finish_reason: "tool_calls",
      },
    ]);
    const answerInput = JSON.parse(String(answer!.attributes["gen_ai.input.messages"])) as unknown[];
    expect(answerInput.slice(2)).toEqual([
      { role: "tool", parts: [{ type: "tool_call_response", id: "call_2_1", response: "value of a" }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "call_2_2", response: "value of b" }] },
    ]);

    const tools = spansNamed("execute_tool lookup").map((span) => [
      span.attributes["gen_ai.tool.call.arguments"],
      span.attributes["gen_ai.tool.call.result"],
    ]);
    expect(tools.sort()).toEqual([
      ['{"key":"a"}', "value of a"],
      ['{"key":"b"}', "value of b"],
    ]);
  });

  it("reads no process environment: with the variable set in the process, content stays off", async () => {
    vi.stubEnv(CAPTURE_CONTENT_ENV, "true");
    const { agent } = await createTestAgent({
      script: [{ text: "Hi." }],
      tracing: { tracer: provider.getTracer("agentloop-test") },
    });
    await agent.chat("hello");
    const keys = exporter.getFinishedSpans().flatMap((span) => Object.keys(span.attributes));
    expect(keys.filter((key) => CONTENT_KEYS.includes(key))).toEqual([]);
  });

  it("errors: a failing tool and a failing model request set status ERROR with the error type", async () => {
    const broken = defineTool({
      name: "broken",
      description: "Always fails.",
      parameters: z.object({}),
      execute: () => {
        throw new Error("disk on fire");
      },
    });
    const { agent } = await createTestAgent({
      script: [{ toolCalls: [{ name: "broken" }] }, { error: new AuthenticationError("bad key") }],
      tools: [broken],
      tracing: { tracer: provider.getTracer("agentloop-test") },
    });
    await expect(agent.chat("break things")).rejects.toThrow("bad key");

    expect(tree(exporter.getFinishedSpans())).toEqual([
      "invoke_agent tester",
      "  iteration",
      "    chat scripted-model",
      "    execute_tool broken",
      "  iteration",
      "    chat scripted-model",
    ]);
    const tool = only("execute_tool broken");
    expect(tool.status.code).toBe(SpanStatusCode.ERROR);
    expect(tool.attributes["error.type"]).toBe("Error");

    const [, failedRequest] = spansNamed("chat scripted-model");
    expect(failedRequest!.status).toEqual({ code: SpanStatusCode.ERROR, message: "bad key" });
    expect(failedRequest!.attributes["error.type"]).toBe("AuthenticationError");
    const [first, second] = spansNamed("iteration");
    expect(first!.status.code).toBe(SpanStatusCode.UNSET);
    expect(second!.status.code).toBe(SpanStatusCode.ERROR);
    expect(second!.attributes["error.type"]).toBe("AuthenticationError");

    const chat = only("invoke_agent tester");
    expect(chat.status).toEqual({ code: SpanStatusCode.ERROR, message: "bad key" });
    expect(chat.attributes["error.type"]).toBe("AuthenticationError");
  });

  it("a cancelled chat ends the spans of its running tools with it", async () => {
    const slow = createControlledTool("slow", z.object({ key: z.string() }));
    const { agent } = await createTestAgent({
      script: [{ toolCalls: [{ name: "slow", arguments: { key: "x" } }] }],
      tools: [slow.tool],
      tracing: { tracer: provider.getTracer("agentloop-test") },
    });
    const controller = new AbortController();
    const chat = agent.chat("wait", { signal: controller.signal });
    await waitUntil(() => slow.calls.length === 1);
    controller.abort();
    await expect(chat).rejects.toThrow();

    const spans = exporter.getFinishedSpans();
    expect(tree(spans)).toEqual([
      "invoke_agent tester",
      "  iteration",
      "    chat scripted-model",
      "    execute_tool slow",
    ]);
    for (const name of ["invoke_agent tester", "iteration", "execute_tool slow"]) {
      expect(only(name).status.code, name).toBe(SpanStatusCode.ERROR);
      expect(only(name).attributes["error.type"], name).toBe("ChatCancelledError");
    }
    expect(spans.every((span) => span.ended)).toBe(true);
  });

  it("a context overflow: the refused iteration fails, the compaction runs, the iteration runs again", async () => {
    const { agent } = await createTestAgent({
      script: [
        { text: "Earlier answer." },
        { error: new ContextLengthExceededError("prompt is too long") },
        { text: "Summary of before." },
        { text: "Answer." },
      ],
      tracing: { tracer: provider.getTracer("agentloop-test") },
    });
    await agent.chat("first");
    exporter.reset();
    await agent.chat("second");

    expect(tree(exporter.getFinishedSpans())).toEqual([
      "invoke_agent tester",
      "  iteration",
      "    chat scripted-model",
      "  compaction",
      "    chat scripted-model",
      "  iteration",
      "    chat scripted-model",
    ]);
    const [refused, retried] = spansNamed("iteration");
    expect(refused!.attributes).toMatchObject({
      "agentloop.iteration": 1,
      "error.type": "ContextLengthExceededError",
    });
    expect(retried!.attributes).toEqual({ "agentloop.iteration": 1, "agentloop.iteration.final": false });
    expect(only("invoke_agent tester").status.code).toBe(SpanStatusCode.UNSET);
  });

  it("a manual compaction is a root span of its own, named for its agent and session", async () => {
    const { agent } = await createTestAgent({
      script: [{ text: "Hi." }, { text: "Summary." }],
      tracing: { tracer: provider.getTracer("agentloop-test") },
    });
    await agent.chat("hello");
    expect(await agent.compact("greetings")).toBe(true);

    expect(tree(exporter.getFinishedSpans())).toEqual([
      "invoke_agent tester",
      "  iteration",
      "    chat scripted-model",
      "compaction",
      "  chat scripted-model",
    ]);
    expect(only("compaction").attributes).toEqual({
      "gen_ai.agent.name": "tester",
      "gen_ai.conversation.id": "s1",
    });
  });

  it("uses the globally registered provider by default, and does nothing without one", async () => {
    const llm = (await createTestAgent({ script: [] })).client;
    expect(registeredTracer()).toBeUndefined();
    expect(createAgentTracing({ agent: "a", session: "s", model: "m", llm })).toBeUndefined();

    trace.setGlobalTracerProvider(provider);
    expect(registeredTracer()).toBeDefined();
    const { agent } = await createTestAgent({ script: [{ text: "Hi." }] });
    await agent.chat("hello");
    expect(tree(exporter.getFinishedSpans())).toEqual([
      "invoke_agent tester",
      "  iteration",
      "    chat scripted-model",
    ]);
    expect(only("invoke_agent tester").instrumentationScope).toMatchObject({
      name: "agentloop",
      version: "0.1.0",
    });
  });
});

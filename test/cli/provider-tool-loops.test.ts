import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/events/types.js";
import {
  type AnthropicEvent,
  anthropicSse,
  chatChunksSse,
  type FakeResponse,
  responsesSse,
  turn,
} from "../../src/testing/index.js";
import { callableTools, parseJsonl, toolResults } from "../support/cli.js";
import { useLocalChat } from "../support/local-chat.js";

/**
 * Tool loops through `agentloop chat --local` in each provider's real wire format, with
 * the reasoning each provider streams alongside (Anthropic thinking + signature + redacted
 * thinking, Responses reasoning summaries, DeepSeek-style `reasoning_content`), tool calls streamed
 * in fragments, and the replay the second request must carry.
 */

const chat = useLocalChat();

type Body = Record<string, unknown>;

const PLAN_ARGUMENTS = JSON.stringify({
  plan: [
    { step: "Look up the time", status: "in_progress" },
    { step: "Report it", status: "pending" },
  ],
});

const SIGNATURE =
  "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds9lKnKsgPV2vRqQDs2gyIjBJgZ4pTrWqU5CPw8n5kR7n";
const REDACTED =
  "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2p";
const SECOND_SIGNATURE = "ErUBCkYIBRgCIkD1mH2v0p8q3nXyZ9w==";

function messageStart(inputTokens: number): AnthropicEvent {
  return {
    type: "message_start",
    message: {
      id: "msg_01Aq9w938a90dw8q",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5-20250929",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: inputTokens,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens: 4,
        service_tier: "standard",
      },
    },
  };
}

/** Thinking (two deltas + a signature), a redacted block, text, then two tool_use blocks. */
function anthropicThinkingToolTurn(): FakeResponse {
  const events: AnthropicEvent[] = [
    messageStart(512),
    {
      type: "content_block_start",
      index: 0,
      content_block: { type: "thinking", thinking: "", signature: "" },
    },
    {
      type: "content_block_delta",
      index: 0,
      delta: { type: "thinking_delta", thinking: "The user wants a plan. " },
    },
    {
      type: "content_block_delta",
      index: 0,
      delta: { type: "thinking_delta", thinking: "I will record it and check the time." },
    },
    { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: SIGNATURE } },
    { type: "content_block_stop", index: 0 },
    {
      type: "content_block_start",
      index: 1,
      content_block: { type: "redacted_thinking", data: REDACTED },
    },
    { type: "content_block_stop", index: 1 },
    { type: "content_block_start", index: 2, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 2, delta: { type: "text_delta", text: "Let me plan" } },
    { type: "content_block_delta", index: 2, delta: { type: "text_delta", text: " this." } },
    { type: "content_block_stop", index: 2 },
    {
      type: "content_block_start",
      index: 3,
      content_block: { type: "tool_use", id: "toolu_01Plan", name: "todo_list", input: {} },
    },
    { type: "content_block_delta", index: 3, delta: { type: "input_json_delta", partial_json: "" } },
    {
      type: "content_block_delta",
      index: 3,
      delta: { type: "input_json_delta", partial_json: PLAN_ARGUMENTS.slice(0, 17) },
    },
    {
      type: "content_block_delta",
      index: 3,
      delta: { type: "input_json_delta", partial_json: PLAN_ARGUMENTS.slice(17) },
    },
    { type: "content_block_stop", index: 3 },
    {
      type: "content_block_start",
      index: 4,
      content_block: { type: "tool_use", id: "toolu_02Time", name: "current_time", input: {} },
    },
    { type: "content_block_delta", index: 4, delta: { type: "input_json_delta", partial_json: "" } },
    { type: "content_block_stop", index: 4 },
    {
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { output_tokens: 158 },
    },
    { type: "message_stop" },
  ];
  return { type: "sse", frames: anthropicSse(events) };
}

/** Interleaved thinking after the tool results, then the answer. */
function anthropicThinkingAnswer(text: string): FakeResponse {
  const events: AnthropicEvent[] = [
    messageStart(700),
    {
      type: "content_block_start",
      index: 0,
      content_block: { type: "thinking", thinking: "", signature: "" },
    },
    {
      type: "content_block_delta",
      index: 0,
      delta: { type: "thinking_delta", thinking: "Both tools answered." },
    },
    {
      type: "content_block_delta",
      index: 0,
      delta: { type: "signature_delta", signature: SECOND_SIGNATURE },
    },
    { type: "content_block_stop", index: 0 },
    { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 1, delta: { type: "text_delta", text } },
    { type: "content_block_stop", index: 1 },
    {
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: 20 },
    },
    { type: "message_stop" },
  ];
  return { type: "sse", frames: anthropicSse(events) };
}

function kindsOf(events: AgentEvent[]): string[] {
  return events.filter((event) => event.kind !== "StateChanged").map((event) => event.kind);
}

function deltas(events: AgentEvent[], kind: "ModelTextDelta" | "ModelReasoningDelta"): string {
  return events.flatMap((event) => (event.kind === kind ? [event.delta] : [])).join("");
}

describe("anthropic tool loop with thinking", () => {
  it("replays thinking (with its signature) and redacted thinking verbatim before the tool_use blocks", async () => {
    const { run, bodies } = await chat(
      "anthropic",
      [anthropicThinkingToolTurn(), anthropicThinkingAnswer("It is noon; the plan is saved.")],
      [
        "--model",
        "claude-sonnet-4-5-20250929",
        "--reasoning-effort",
        "low",
        "--events",
        "jsonl",
        "plan my day",
      ],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(2);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("It is noon; the plan is saved.");
    expect(deltas(events, "ModelReasoningDelta")).toBe(
      "The user wants a plan. I will record it and check the time.Both tools answered.",
    );

    const second = bodies[1] as Body;
    expect(second.thinking).toEqual(bodies[0]?.thinking);
    expect(second.thinking).toMatchObject({ type: "enabled" });
    const messages = second.messages as Array<{ role: string; content: Array<Body> }>;
    expect(messages.map((message) => message.role)).toEqual(["user", "assistant", "user"]);
    expect(messages[1]?.content).toEqual([
      {
        type: "thinking",
        thinking: "The user wants a plan. I will record it and check the time.",
        signature: SIGNATURE,
      },
      { type: "redacted_thinking", data: REDACTED },
      { type: "text", text: "Let me plan this." },
      { type: "tool_use", id: "toolu_01Plan", name: "todo_list", input: JSON.parse(PLAN_ARGUMENTS) },
      { type: "tool_use", id: "toolu_02Time", name: "current_time", input: {} },
    ]);
    const results = (messages[2]?.content ?? []).filter((block) => block.type === "tool_result");
    expect(results.map((block) => block.tool_use_id)).toEqual(["toolu_01Plan", "toolu_02Time"]);
    // The tool results come first in that user turn, as the API requires.
    expect(messages[2]?.content[0]?.type).toBe("tool_result");
    expect(callableTools("anthropic", second).sort()).toEqual(["current_time", "todo_list"]);

    const started = events.filter((event) => event.kind === "ToolCallStarted");
    expect(started.map((event) => event.toolCallId)).toEqual(["toolu_01Plan", "toolu_02Time"]);
    expect(kindsOf(events)).not.toContain("ToolCallFailed");
  });
});

describe("openai-responses tool loop", () => {
  function responsesToolTurn(): FakeResponse {
    const response = (status: string, output: unknown[], usage: unknown = null) => ({
      id: "resp_68879c3e5a7c8190",
      object: "response",
      created_at: 1753700300,
      status,
      model: "gpt-5-mini-2025-08-07",
      output,
      store: false,
      usage,
    });
    const reasoning = {
      id: "rs_68879d01aa3c8190",
      type: "reasoning",
      summary: [{ type: "summary_text", text: "**Planning**\n\nRecord a plan, then check the time." }],
    };
    const planCall = {
      id: "fc_68879d0412bc8190",
      type: "function_call",
      status: "completed",
      arguments: PLAN_ARGUMENTS,
      call_id: "call_plan_1",
      name: "todo_list",
    };
    const timeCall = {
      id: "fc_68879d0512bc8191",
      type: "function_call",
      status: "completed",
      arguments: "{}",
      call_id: "call_time_2",
      name: "current_time",
    };
    return responsesSse([
      { type: "response.created", response: response("in_progress", []) },
      { type: "response.in_progress", response: response("in_progress", []) },
      { type: "response.output_item.added", output_index: 0, item: { ...reasoning, summary: [] } },
      {
        type: "response.reasoning_summary_part.added",
        item_id: reasoning.id,
        output_index: 0,
        summary_index: 0,
        part: { type: "summary_text", text: "" },
      },
      {
        type: "response.reasoning_summary_text.delta",
        item_id: reasoning.id,
        output_index: 0,
        summary_index: 0,
        delta: "**Planning**\n\nRecord a plan,",
      },
      {
        type: "response.reasoning_summary_text.delta",
        item_id: reasoning.id,
        output_index: 0,
        summary_index: 0,
        delta: " then check the time.",
      },
      {
        type: "response.reasoning_summary_text.done",
        item_id: reasoning.id,
        output_index: 0,
        summary_index: 0,
        text: "**Planning**\n\nRecord a plan, then check the time.",
      },
      { type: "response.output_item.done", output_index: 0, item: reasoning },
      {
        type: "response.output_item.added",
        output_index: 1,
        item: { ...planCall, status: "in_progress", arguments: "" },
      },
      {
        type: "response.function_call_arguments.delta",
        item_id: planCall.id,
        output_index: 1,
        delta: PLAN_ARGUMENTS.slice(0, 20),
      },
      {
        type: "response.function_call_arguments.delta",
        item_id: planCall.id,
        output_index: 1,
        delta: PLAN_ARGUMENTS.slice(20),
      },
      {
        type: "response.function_call_arguments.done",
        item_id: planCall.id,
        output_index: 1,
        arguments: PLAN_ARGUMENTS,
      },
      { type: "response.output_item.done", output_index: 1, item: planCall },
      {
        type: "response.output_item.added",
        output_index: 2,
        item: { ...timeCall, status: "in_progress", arguments: "" },
      },
      {
        type: "response.function_call_arguments.delta",
        item_id: timeCall.id,
        output_index: 2,
        delta: "{}",
      },
      {
        type: "response.function_call_arguments.done",
        item_id: timeCall.id,
        output_index: 2,
        arguments: "{}",
      },
      { type: "response.output_item.done", output_index: 2, item: timeCall },
      {
        type: "response.completed",
        response: response("completed", [reasoning, planCall, timeCall], {
          input_tokens: 300,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 90,
          output_tokens_details: { reasoning_tokens: 64 },
          total_tokens: 390,
        }),
      },
    ]);
  }

  it("sends function_call items and their function_call_output linked by call_id, in call order", async () => {
    const { run, bodies } = await chat(
      "openai-responses",
      [
        responsesToolTurn(),
        turn({ text: ["Planned; it is ", "noon."], usage: { prompt: 400, completion: 9 } }),
      ],
      ["--model", "gpt-5-mini", "--reasoning-effort", "medium", "--events", "jsonl", "plan my day"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Planned; it is noon.");
    // Usage is the sum over the two requests.
    expect(last.usage).toMatchObject({ prompt: 700, completion: 99, total: 799 });
    expect(deltas(events, "ModelReasoningDelta")).toBe("**Planning**\n\nRecord a plan, then check the time.");
    expect(bodies).toHaveLength(2);
    const second = bodies[1] as Body;
    expect(second.instructions).toEqual(expect.stringContaining("todo_list"));
    expect(second.reasoning).toMatchObject({ effort: "medium" });
    const input = second.input as Body[];
    const calls = input.filter((item) => item.type === "function_call");
    expect(
      calls.map((item) => ({ call_id: item.call_id, name: item.name, arguments: item.arguments })),
    ).toEqual([
      { call_id: "call_plan_1", name: "todo_list", arguments: PLAN_ARGUMENTS },
      { call_id: "call_time_2", name: "current_time", arguments: "{}" },
    ]);
    const outputs = input.filter((item) => item.type === "function_call_output");
    expect(outputs.map((item) => item.call_id)).toEqual(["call_plan_1", "call_time_2"]);
    // Each output follows the calls (never before its call).
    const lastCall = input.findIndex(
      (item) => item.call_id === "call_time_2" && item.type === "function_call",
    );
    const firstOutput = input.findIndex((item) => item.type === "function_call_output");
    expect(firstOutput).toBeGreaterThan(lastCall);
    expect(String(outputs[1]?.output)).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(kindsOf(events)).not.toContain("ToolCallFailed");
  });
});

describe("openai-chat tool calls fragmented by index", () => {
  const base = {
    id: "chatcmpl-BxQ4nT1ZkV9sYH2p",
    object: "chat.completion.chunk",
    created: 1753700000,
    model: "deepseek-reasoner",
    system_fingerprint: "fp_6f2eabb9a5",
  };
  const chunk = (delta: Body, finishReason: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    usage: null,
  });
  const fragment = (index: number, fields: Body) => chunk({ tool_calls: [{ index, ...fields }] });

  function interleavedToolTurn(): FakeResponse {
    return chatChunksSse([
      chunk({ role: "assistant", content: null, reasoning_content: "" }),
      chunk({ reasoning_content: "Plan first, " }),
      chunk({ reasoning_content: "then the time." }),
      fragment(0, { id: "call_plan_0", type: "function", function: { name: "todo_list", arguments: "" } }),
      fragment(1, { id: "call_time_1", type: "function", function: { name: "current_time", arguments: "" } }),
      fragment(0, { function: { arguments: PLAN_ARGUMENTS.slice(0, 9) } }),
      fragment(1, { function: { arguments: "{" } }),
      fragment(0, { function: { arguments: PLAN_ARGUMENTS.slice(9, 40) } }),
      fragment(1, { function: { arguments: "}" } }),
      fragment(0, { function: { arguments: PLAN_ARGUMENTS.slice(40) } }),
      chunk({}, "tool_calls"),
      {
        ...base,
        choices: [],
        usage: {
          prompt_tokens: 412,
          completion_tokens: 48,
          total_tokens: 460,
          prompt_tokens_details: { cached_tokens: 128 },
        },
      },
    ]);
  }

  it("assembles each call from its own fragments and replays both calls and both results in order", async () => {
    const { run, bodies } = await chat(
      "openai-chat",
      [interleavedToolTurn(), turn({ text: "Plan saved.", usage: { prompt: 500, completion: 3 } })],
      ["--events", "jsonl", "plan my day"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Plan saved.");
    expect(last.usage).toEqual({ prompt: 912, completion: 51, total: 963, cached: 128 });
    expect(deltas(events, "ModelReasoningDelta")).toBe("Plan first, then the time.");
    const started = events.filter((event) => event.kind === "ToolCallStarted");
    expect(started.map((event) => [event.toolName, event.toolCallId, event.arguments])).toEqual([
      ["todo_list", "call_plan_0", PLAN_ARGUMENTS],
      ["current_time", "call_time_1", "{}"],
    ]);
    expect(kindsOf(events)).not.toContain("ToolCallFailed");

    const messages = (bodies[1] as Body).messages as Body[];
    const assistant = messages.find((message) => message.role === "assistant");
    expect(assistant?.tool_calls).toEqual([
      { id: "call_plan_0", type: "function", function: { name: "todo_list", arguments: PLAN_ARGUMENTS } },
      { id: "call_time_1", type: "function", function: { name: "current_time", arguments: "{}" } },
    ]);
    // DeepSeek thinking mode answers 400 unless a tool-calling turn's reasoning is sent back.
    expect(assistant?.reasoning_content).toBe("Plan first, then the time.");
    expect(toolResults("openai-chat", bodies[1] as Body).map((result) => result.callId)).toEqual([
      "call_plan_0",
      "call_time_1",
    ]);
    // The tool messages directly follow the assistant message that made the calls.
    const assistantIndex = messages.indexOf(assistant as Body);
    expect(messages.slice(assistantIndex + 1).map((message) => message.role)).toEqual(["tool", "tool"]);
  });
});

import { describe, expect, it } from "vitest";
import { DemoBackend } from "../../src/llm/demo/demo-backend.js";
import { CancelledError } from "../../src/llm/errors.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import type {
  GenerateResponse,
  LlmOptions,
  Message,
  StreamSink,
  ToolDefinition,
} from "../../src/llm/types.js";

const tool = (name: string): ToolDefinition => ({ name, description: name, parameters: { type: "object" } });
const builtinTools: LlmOptions = { model: "demo", tools: [tool("current_time"), tool("todo_list")] };
const noTools: LlmOptions = { model: "demo" };

const user = (content: string): Message => ({ role: "user", content });

interface Streamed {
  reasoning: string[];
  text: string[];
  response: GenerateResponse;
}

async function stream(
  messages: Message[],
  options: LlmOptions,
  backend = new DemoBackend({ deltaDelayMs: 0 }),
) {
  const streamed: Omit<Streamed, "response"> = { reasoning: [], text: [] };
  const response = await backend.generateStream(
    { messages, options },
    {
      onTextDelta: (delta) => streamed.text.push(delta),
      onReasoningDelta: (delta) => {
        expect(streamed.text).toEqual([]);
        streamed.reasoning.push(delta);
      },
    },
  );
  return { ...streamed, response };
}

describe("DemoBackend", () => {
  it("streams its reasoning and then its labelled answer word by word", async () => {
    const { reasoning, text, response } = await stream([user("Tell me about sailing boats")], noTools);
    expect(response.content.startsWith("[demo] ")).toBe(true);
    expect(response.content).toContain('"Tell me about sailing boats"');
    expect(text.length).toBeGreaterThan(5);
    expect(text.join("")).toBe(response.content);
    expect(text.every((delta) => delta.trim().split(/\s+/).length === 1)).toBe(true);
    expect(reasoning.length).toBeGreaterThan(1);
    expect(reasoning.join("")).toBe(response.reasoningContent);
    expect(response.toolCalls).toEqual([]);
    expect(response.finishReason).toBe("stop");
    expect(new DemoBackend().provider).toBe("demo");
  });

  it("is deterministic: the same conversation gives the same stream and response", async () => {
    const conversation = [user("Make a plan: pack, travel and rest. What time is it?")];
    const first = await stream(conversation, builtinTools);
    const second = await stream(structuredClone(conversation), builtinTools);
    expect(second).toEqual(first);
    expect(await new DemoBackend().generate({ messages: conversation, options: builtinTools })).toEqual(
      first.response,
    );
  });

  it("calls current_time when the prompt mentions the time and the tool is offered", async () => {
    const { text, response } = await stream([user("What time is it in Lisbon?")], builtinTools);
    expect(response.toolCalls).toEqual([{ id: "demo_call_1", name: "current_time", arguments: "{}" }]);
    expect(response.content).toBe("");
    expect(text).toEqual([]);
    expect(response.finishReason).toBe("tool_calls");
    expect(response.reasoningContent).toContain("current_time");
  });

  it("calls todo_list with a plan derived from the prompt", async () => {
    const { response } = await stream(
      [user("Make a plan to bake bread: buy flour, knead the dough, then bake.")],
      builtinTools,
    );
    expect(response.toolCalls).toHaveLength(1);
    const call = response.toolCalls[0];
    expect(call?.name).toBe("todo_list");
    expect(JSON.parse(call?.arguments ?? "")).toEqual({
      plan: [
        { step: "Buy flour", status: "in_progress" },
        { step: "Knead the dough", status: "pending" },
        { step: "Bake", status: "pending" },
      ],
      explanation: "A plan derived from your message by the demo model.",
    });
  });

  it("takes plan steps from a list, else falls back to three generic steps", async () => {
    const stepsOf = async (prompt: string) => {
      const { response } = await stream([user(prompt)], builtinTools);
      const args = JSON.parse(response.toolCalls[0]?.arguments ?? "{}") as { plan: Array<{ step: string }> };
      return args.plan.map((item) => item.step);
    };
    expect(
      await stepsOf("Here is my todo list\n- write the report\n- send it to Ana\n* book a room"),
    ).toEqual(["Write the report", "Send it to Ana", "Book a room"]);
    expect(await stepsOf("plan a quiet weekend")).toEqual([
      "Understand the request: plan a quiet weekend",
      "Work through it step by step",
      "Summarise the result",
    ]);
  });

  it("makes both calls in one response when both apply, with ids counted over the conversation", async () => {
    const conversation: Message[] = [
      user("hello"),
      { role: "assistant", content: "", toolCalls: [{ id: "x", name: "current_time", arguments: "{}" }] },
      { role: "tool", content: "2025-01-01T10:00:00+01:00", toolCallId: "x", toolName: "current_time" },
      { role: "assistant", content: "[demo] The current time is 2025-01-01T10:00:00+01:00." },
      user("Show me the steps for today and the date"),
    ];
    const { response } = await stream(conversation, builtinTools);
    expect(response.toolCalls.map((call) => [call.id, call.name])).toEqual([
      ["demo_call_2", "current_time"],
      ["demo_call_3", "todo_list"],
    ]);
  });

  it("answers in text when tools are not offered or not callable", async () => {
    for (const options of [
      noTools,
      { ...builtinTools, toolChoice: "none" as const },
      { model: "demo", tools: [tool("other")] },
    ]) {
      const { response } = await stream([user("What time is it?")], options);
      expect(response.toolCalls).toEqual([]);
      expect(response.content.startsWith("[demo] ")).toBe(true);
    }
  });

  it("reports tool results in text, quoting the time and the plan", async () => {
    const plan = { plan: [{ step: "Pack", status: "in_progress" }], explanation: "x" };
    const conversation: Message[] = [
      user("What time is it? And plan my day."),
      {
        role: "assistant",
        content: "",
        toolCalls: [
          { id: "demo_call_1", name: "current_time", arguments: "{}" },
          { id: "demo_call_2", name: "todo_list", arguments: JSON.stringify(plan) },
        ],
      },
      {
        role: "tool",
        content: "2025-06-01T12:34:56+02:00",
        toolCallId: "demo_call_1",
        toolName: "current_time",
      },
      { role: "tool", content: "Plan updated.", toolCallId: "demo_call_2" },
    ];
    const { text, response } = await stream(conversation, builtinTools);
    expect(response.toolCalls).toEqual([]);
    expect(response.content).toBe(
      "[demo] The current time is 2025-06-01T12:34:56+02:00.\nI recorded this plan:\n1. Pack (in_progress)",
    );
    expect(text.join("")).toBe(response.content);
  });

  it("reports a failed tool with its error message", async () => {
    const conversation: Message[] = [
      user("what time is it"),
      { role: "assistant", content: "", toolCalls: [{ id: "c", name: "current_time", arguments: "{}" }] },
      { role: "tool", content: '{"error": "clock unavailable"}', toolCallId: "c", toolName: "current_time" },
    ];
    const { response } = await stream(conversation, builtinTools);
    expect(response.content).toBe("[demo] The tool current_time failed: clock unavailable.");
  });

  it("ignores injected reminder blocks when deciding what the user asked", async () => {
    const reminder =
      "<TODO_LIST_REMINDER>\nThis is your current plan.\n1. [ ] Pack (pending)\n</TODO_LIST_REMINDER>";
    const { response } = await stream([user(`${reminder}\nThanks, that is all.`)], builtinTools);
    expect(response.toolCalls).toEqual([]);
    expect(response.content).toContain('"Thanks, that is all."');
    expect(response.content).not.toContain("TODO_LIST_REMINDER");
  });

  it("answers a compaction request with a deterministic summary of the conversation", async () => {
    const conversation: Message[] = [
      { role: "system", content: "You are a helpful assistant." },
      user("What time is it?"),
      { role: "assistant", content: "", toolCalls: [{ id: "c", name: "current_time", arguments: "{}" }] },
      { role: "tool", content: "2025-06-01T12:00:00Z", toolCallId: "c", toolName: "current_time" },
      { role: "assistant", content: "[demo] The current time is 2025-06-01T12:00:00Z." },
      user("Summarize the conversation so far so that it can continue from the summary."),
    ];
    const { response } = await stream(conversation, { model: "demo" });
    expect(response.toolCalls).toEqual([]);
    expect(response.content).toBe(
      [
        "[demo] Summary of the conversation so far (4 messages).",
        "The user asked:",
        '- "What time is it?"',
        "Tools called: current_time ×1.",
        'Last answer: "[demo] The current time is 2025-06-01T12:00:00Z."',
      ].join("\n"),
    );
  });

  it("estimates usage as ceil(characters / 4)", async () => {
    const { response } = await stream([user("abcde")], noTools);
    const completion = Math.ceil(((response.reasoningContent ?? "") + response.content).length / 4);
    expect(response.usage).toEqual({ prompt: 2, completion, total: 2 + completion, cached: 0 });
  });

  it("pauses before each delta with the injected sleep and stops when aborted", async () => {
    const pauses: number[] = [];
    const controller = new AbortController();
    const backend = new DemoBackend({
      deltaDelayMs: 15,
      sleep: async (ms) => {
        pauses.push(ms);
        if (pauses.length === 3) controller.abort();
      },
    });
    const deltas: string[] = [];
    const pending = backend.generateStream(
      { messages: [user("hello there")], options: noTools, signal: controller.signal },
      { onTextDelta: (delta) => deltas.push(delta), onReasoningDelta: (delta) => deltas.push(delta) },
    );
    await expect(pending).rejects.toBeInstanceOf(CancelledError);
    expect(pauses).toEqual([15, 15, 15]);
    expect(deltas).toHaveLength(2);
  });

  it("runs a tool round trip through the retrying client without tripping the stray-markup check", async () => {
    const llm = new RetryingLlmClient({ backend: new DemoBackend({ deltaDelayMs: 0 }) });
    const resets: string[] = [];
    const sink: StreamSink = {
      onTextDelta: () => {},
      onReasoningDelta: () => {},
      onReset: (reason) => resets.push(reason),
      onCompleted: () => {},
    };
    const messages: Message[] = [user("Make a plan with steps for the time we have")];
    const first = await llm.generateStream({ messages, options: builtinTools }, sink);
    messages.push({ role: "assistant", content: first.content, toolCalls: first.toolCalls });
    for (const call of first.toolCalls) {
      messages.push({
        role: "tool",
        content: call.name === "current_time" ? "noon" : "ok",
        toolCallId: call.id,
      });
    }
    const second = await llm.generateStream({ messages, options: builtinTools }, sink);
    expect(first.toolCalls.map((call) => call.name)).toEqual(["current_time", "todo_list"]);
    expect(second.content).toContain("The current time is noon.");
    expect(resets).toEqual([]);
  });
});

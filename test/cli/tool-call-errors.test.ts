import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/events/types.js";
import { turn } from "../../src/testing/index.js";
import { callableTools, HOSTED_PROVIDERS, parseJsonl, textTurn, toolResults } from "../support/cli.js";
import { useLocalChat } from "../support/local-chat.js";

/**
 * Tool errors the model causes through `agentloop chat --local`: arguments
 * that fail the schema, arguments that are not JSON, an unknown tool name. Each becomes a
 * `ToolCallFailed` event and an `{"error": …}` result in the next request; the chat goes on.
 * Also the iteration cap with reasoning on.
 */

const chat = useLocalChat();

function errorOf(output: string): string {
  const parsed = JSON.parse(output) as { error?: unknown };
  expect(Object.keys(parsed)).toEqual(["error"]);
  expect(typeof parsed.error).toBe("string");
  return parsed.error as string;
}

describe.each(HOSTED_PROVIDERS)("tool errors with --provider %s", (provider) => {
  it("bad todo_list arguments and an unknown tool → ToolCallFailed and {error} results; the chat goes on", async () => {
    const calls = [
      {
        id: "call_bad_schema",
        name: "todo_list",
        arguments: JSON.stringify({ plan: [{ step: "x", status: "done" }] }),
      },
      { id: "call_unknown", name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) },
      { id: "call_time", name: "current_time", arguments: "{}" },
    ];
    const { run, bodies } = await chat(
      provider,
      [turn({ toolCalls: calls }), textTurn("Sorry, fixed.")],
      ["--events", "jsonl", "plan and weather"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(2);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Sorry, fixed.");

    const failed = events.filter(
      (event): event is Extract<AgentEvent, { kind: "ToolCallFailed" }> => event.kind === "ToolCallFailed",
    );
    expect(failed.map((event) => event.toolCallId).sort()).toEqual(["call_bad_schema", "call_unknown"]);
    for (const event of failed) {
      expect(event.iteration).toBe(1);
      expect(event.error.message.length).toBeGreaterThan(0);
    }
    expect(
      events.filter((event) => event.kind === "ToolCallCompleted").map((event) => event.toolCallId),
    ).toEqual(["call_time"]);

    const results = toolResults(provider, bodies[1]!);
    expect(results.map((result) => result.callId)).toEqual(["call_bad_schema", "call_unknown", "call_time"]);
    expect(errorOf(results[0]!.output)).toMatch(/status|plan/i);
    expect(errorOf(results[1]!.output)).toBe("tool not found: get_weather");
    expect(results[2]!.output).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // The tools are still offered after a failure, so the model can correct itself.
    expect(callableTools(provider, bodies[1]!).sort()).toEqual(["current_time", "todo_list"]);
  });

  it("arguments that are not JSON → an {error} result the model sees, not a failed chat", async () => {
    const { run, bodies } = await chat(
      provider,
      [
        turn({
          toolCalls: [{ id: "call_broken", name: "todo_list", arguments: '{"plan": [{"step": "a", ' }],
        }),
        textTurn("Retrying later."),
      ],
      ["--events", "jsonl", "plan"],
    );
    // Anthropic's SDK parses tool_use input itself; a broken fragment may surface as `{}`
    // (the schema then fails) or as an invalid response. Either way the user gets one clean outcome.
    if (run.code !== 0) {
      expect(run.stderr).toMatch(/^agentloop: chat failed: /);
      return;
    }
    expect(run.stderr).toBe("");
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Retrying later.");
    expect(events.filter((event) => event.kind === "ToolCallFailed")).toHaveLength(1);
    const results = toolResults(provider, bodies[1]!);
    expect(results.map((result) => result.callId)).toEqual(["call_broken"]);
    expect(errorOf(results[0]!.output).length).toBeGreaterThan(0);
  });

  it("a valid todo_list call is injected as <TODO_LIST_REMINDER> into the next user message only", async () => {
    const plan = JSON.stringify({ plan: [{ step: "Write the report", status: "in_progress" }] });
    const { run, bodies } = await chat(
      provider,
      [turn({ toolCalls: [{ id: "call_plan", name: "todo_list", arguments: plan }] }), textTurn("On it.")],
      ["--events", "jsonl", "plan"],
    );
    expect(run.code).toBe(0);
    const { events } = parseJsonl(run.stdout);
    expect(events.filter((event) => event.kind === "ToolCallFailed")).toEqual([]);
    // The plan was empty when this chat's user message was built: no reminder in it.
    expect(JSON.stringify(bodies[0])).not.toContain("TODO_LIST_REMINDER");
  });
});

describe.each(HOSTED_PROVIDERS)("the iteration cap with reasoning on (--provider %s)", (provider) => {
  it("the final request forbids tool calls but keeps the reasoning settings", async () => {
    const model = provider === "anthropic" ? "claude-sonnet-4-5-20250929" : "gpt-5-mini";
    const call = (id: string) => ({ id, name: "current_time", arguments: "{}" });
    const { run, bodies } = await chat(
      provider,
      [
        turn({ toolCalls: [call("call_a")] }),
        turn({ toolCalls: [call("call_b")] }),
        textTurn("Final answer."),
      ],
      ["--model", model, "--reasoning-effort", "high", "--max-iterations", "3", "--events", "jsonl", "time?"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(3);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Final answer.");
    const requests = events.filter((event) => event.kind === "ModelRequest");
    expect(requests.map((event) => event.iteration)).toEqual([1, 2, 3]);
    expect(requests.at(-1)).toMatchObject({ final: true });
    expect(callableTools(provider, bodies[0]!)).toContain("current_time");
    expect(callableTools(provider, bodies[1]!)).toContain("current_time");
    expect(callableTools(provider, bodies[2]!)).toEqual([]);
    for (const body of bodies) {
      if (provider === "anthropic") expect(body.thinking).toMatchObject({ type: "enabled" });
      else if (provider === "openai-chat") expect(body.reasoning_effort).toBe("high");
      else expect(body.reasoning).toMatchObject({ effort: "high" });
    }
    // Both earlier tool results reach the final request.
    expect(toolResults(provider, bodies[2]!).map((result) => result.callId)).toEqual(["call_a", "call_b"]);
    const chatStates = events.flatMap((event) =>
      event.kind === "StateChanged" && event.machine === "chat" ? [JSON.stringify(event.state)] : [],
    );
    expect(chatStates).toContain(JSON.stringify({ iterating: "finalTurn" }));
  });

  it("a model that calls a tool anyway on the final turn still ends the chat cleanly", async () => {
    const call = (id: string) => ({ id, name: "current_time", arguments: "{}" });
    const { run, bodies } = await chat(
      provider,
      [
        turn({ toolCalls: [call("call_a")] }),
        turn({ text: "Let me check again.", toolCalls: [call("call_b")] }),
      ],
      ["--max-iterations", "2", "time?"],
    );
    expect(bodies).toHaveLength(2);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Let me check again.\n");
  });
});

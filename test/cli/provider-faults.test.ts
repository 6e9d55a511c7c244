import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/events/types.js";
import {
  anthropicSse,
  anthropicSseFrame,
  chatTurnSse,
  cutAfterFrames,
  type FakeResponse,
  responsesTurnSse,
  sseFrame,
  turn,
} from "../../src/testing/index.js";
import {
  anthropicTurn,
  HOSTED_PROVIDERS,
  type HostedProvider,
  linesOf,
  parseJsonl,
  providerError,
  stackLines,
  textTurn,
} from "../support/cli.js";
import { anthropicFixture } from "../support/fixtures.js";
import { useLocalChat } from "../support/local-chat.js";

/**
 * Provider faults through `agentloop chat --local`, for each wire format: a 429 with
 * retry-after, a 400, a stream cut mid-answer, an empty reply, malformed JSON.
 */

const chat = useLocalChat();

/** A text turn rendered as the provider's stream (to cut it or tamper with it). */
function streamedTurn(provider: HostedProvider, text: string[]): Extract<FakeResponse, { type: "sse" }> {
  const reply =
    provider === "anthropic"
      ? anthropicTurn({ text }, true)
      : provider === "openai-chat"
        ? chatTurnSse({ text })
        : responsesTurnSse({ text });
  if (reply.type !== "sse") throw new Error("expected a stream");
  return reply;
}

/** The index of the frame holding the first text delta, so a cut lands after some text. */
function framesThroughFirstDelta(provider: HostedProvider, reply: { frames: string[] }): number {
  const marker =
    provider === "anthropic"
      ? '"text_delta"'
      : provider === "openai-chat"
        ? '"content":"'
        : "output_text.delta";
  const index = reply.frames.findIndex((frame) => frame.includes(marker) && !frame.includes('"content":""'));
  if (index < 0) throw new Error("no text delta in the stream");
  return index + 1;
}

function withoutStates(events: AgentEvent[]): AgentEvent[] {
  return events.filter((event) => event.kind !== "StateChanged");
}

describe.each(HOSTED_PROVIDERS)("faults with --provider %s", (provider) => {
  it("a 429 with retry-after: 1 → one reset, the same request again, then the answer", async () => {
    const { run, bodies } = await chat(
      provider,
      [
        providerError(provider, 429, "rate limited, slow down", { "retry-after": "1" }),
        textTurn("Fine", " now."),
      ],
      ["--events", "jsonl", "hi"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(2);
    expect(bodies[1]).toEqual(bodies[0]);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Fine now.");
    const segments = withoutStates(events).filter(
      (event) => event.kind === "ModelStreamSegmentReset" || event.kind === "ModelStreamSegmentStart",
    );
    expect(segments).toHaveLength(2);
    expect(segments[0]).toMatchObject({ kind: "ModelStreamSegmentReset", attempt: 1, iteration: 1 });
    const reset = segments[0] as Extract<AgentEvent, { kind: "ModelStreamSegmentReset" }>;
    expect(reset.reason).toMatch(/rate/i);
    expect(reset.error?.message ?? "").toContain("rate limited");
    expect(segments[1]).toMatchObject({ kind: "ModelStreamSegmentStart", attempt: 2 });
    expect(events.filter((event) => event.kind === "ModelRequest")).toHaveLength(1);
  });

  it("a 400 → exactly one request, exit 1, one line on stderr naming the problem", async () => {
    const { run, bodies } = await chat(
      provider,
      [providerError(provider, 400, "messages: text content blocks must be non-empty"), textTurn("never")],
      ["--events", "jsonl", "hi"],
    );
    expect(bodies).toHaveLength(1);
    expect(run.code).not.toBe(0);
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: chat failed: .*text content blocks must be non-empty/);
    expect(stackLines(run.stderr)).toEqual([]);
    const kinds = linesOf(run.stdout).map((line) => (JSON.parse(line) as { kind: string }).kind);
    expect(kinds).not.toContain("Result");
    expect(kinds).not.toContain("ModelStreamSegmentReset");
    expect(kinds.filter((kind) => kind !== "StateChanged").at(-1)).toBe("ChatFailed");
  });

  it("a stream cut mid-answer → reset (attempt 1, reason), a new segment (attempt 2), only its text in the Result", async () => {
    const broken = streamedTurn(provider, ["Partial ", "answer that ", "dies"]);
    const cut = cutAfterFrames(broken, framesThroughFirstDelta(provider, broken) + 1);
    const { run, bodies } = await chat(
      provider,
      [cut, textTurn("Complete ", "answer.")],
      ["--events", "jsonl", "hi"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(2);
    expect(bodies[1]).toEqual(bodies[0]);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Complete answer.");
    const flow = withoutStates(events).filter((event) =>
      ["ModelStreamSegmentStart", "ModelStreamSegmentReset", "ModelTextDelta"].includes(event.kind),
    );
    const firstReset = flow.findIndex((event) => event.kind === "ModelStreamSegmentReset");
    expect(flow[0]).toMatchObject({ kind: "ModelStreamSegmentStart", attempt: 1 });
    expect(firstReset).toBeGreaterThan(1);
    const reset = flow[firstReset] as Extract<AgentEvent, { kind: "ModelStreamSegmentReset" }>;
    expect(reset.attempt).toBe(1);
    expect(typeof reset.reason).toBe("string");
    expect(reset.reason.length).toBeGreaterThan(0);
    expect(flow[firstReset + 1]).toMatchObject({ kind: "ModelStreamSegmentStart", attempt: 2 });
    const after = flow.slice(firstReset + 1);
    expect(after.some((event) => event.kind === "ModelStreamSegmentReset")).toBe(false);
    expect(after.flatMap((event) => (event.kind === "ModelTextDelta" ? [event.delta] : [])).join("")).toBe(
      "Complete answer.",
    );
    const completed = events.find((event) => event.kind === "ChatCompleted");
    expect(completed).toMatchObject({ result: "Complete answer." });
  });

  it("an empty reply → the placeholder, never an empty string", async () => {
    const { run } = await chat(provider, [turn({})], ["--events", "jsonl", "hi"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("(the model returned no content)");
    expect(events.find((event) => event.kind === "ChatCompleted")).toMatchObject({
      result: "(the model returned no content)",
    });
    const plain = await chat(provider, [turn({})], ["hi"]);
    expect(plain.run).toEqual({ code: 0, stdout: "(the model returned no content)\n", stderr: "" });
  });

  it("an empty reply after a tool turn → the placeholder too", async () => {
    const { run, bodies } = await chat(
      provider,
      [turn({ toolCalls: [{ id: "call_t", name: "current_time", arguments: "{}" }] }), turn({})],
      ["hi"],
    );
    expect(bodies).toHaveLength(2);
    expect(run).toEqual({ code: 0, stdout: "(the model returned no content)\n", stderr: "" });
  });

  it("malformed JSON in the stream → exit non-zero, one clean line on stderr", async () => {
    const good = streamedTurn(provider, ["Hel", "lo"]);
    const index = framesThroughFirstDelta(provider, good) - 1;
    const frames = [...good.frames];
    frames[index] =
      provider === "anthropic"
        ? anthropicSseFrame(
            "content_block_delta",
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_',
          )
        : provider === "openai-chat"
          ? sseFrame('{"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"Hel')
          : sseFrame('{"type":"response.output_text.delta","delta":"Hel', "response.output_text.delta");
    const malformed: FakeResponse = { ...good, frames };
    const { run, bodies } = await chat(provider, [malformed, malformed, malformed], ["hi"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(linesOf(run.stderr)).toHaveLength(1);
    // An invalid response is not retried: the same request would get the same answer.
    expect(run.stderr).toMatch(/^agentloop: chat failed: InvalidResponseError: /);
    expect(bodies).toHaveLength(1);
    expect(stackLines(run.stderr)).toEqual([]);
  });

  it("a 200 whose JSON body is not JSON at all (a proxy's HTML page) → one clean line", async () => {
    const html: FakeResponse = { type: "sse", frames: ["<html><body>502 Bad Gateway</body></html>"] };
    const { run } = await chat(provider, [html, html, html], ["hi"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: chat failed: /);
    expect(stackLines(run.stderr)).toEqual([]);
  });
});

describe("anthropic overloaded error event mid-stream", () => {
  it("resets and retries; the Result holds only the retried text", async () => {
    const { run, bodies } = await chat(
      "anthropic",
      [anthropicFixture("overloaded-mid-stream"), textTurn("Recovered.")],
      ["--events", "jsonl", "hi"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(2);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Recovered.");
    const resets = events.filter((event) => event.kind === "ModelStreamSegmentReset");
    expect(resets).toMatchObject([{ attempt: 1 }]);
  });
});

describe.each(HOSTED_PROVIDERS)("a cut during reasoning (--provider %s)", (provider) => {
  /** A stream that sends two reasoning deltas and is then cut. */
  function reasoningThenCut(): FakeResponse {
    if (provider === "anthropic") {
      return {
        type: "sse",
        cutAfter: 4,
        frames: anthropicSse([
          {
            type: "message_start",
            message: {
              id: "msg_cut",
              type: "message",
              role: "assistant",
              model: "claude-sonnet-4-5-20250929",
              content: [],
              stop_reason: null,
              stop_sequence: null,
              usage: { input_tokens: 20, output_tokens: 1 },
            },
          },
          {
            type: "content_block_start",
            index: 0,
            content_block: { type: "thinking", thinking: "", signature: "" },
          },
          { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Hmm, " } },
          {
            type: "content_block_delta",
            index: 0,
            delta: { type: "thinking_delta", thinking: "let me think." },
          },
        ]),
      };
    }
    const full =
      provider === "openai-chat"
        ? chatTurnSse({ reasoning: ["Hmm, ", "let me think."], text: ["never"] })
        : responsesTurnSse({ reasoning: ["Hmm, ", "let me think."], text: ["never"] });
    if (full.type !== "sse") throw new Error("expected a stream");
    const marker = provider === "openai-chat" ? "let me think." : "reasoning_summary_text.delta";
    const last = full.frames.map((frame) => frame.includes(marker)).lastIndexOf(true);
    return cutAfterFrames(full, last + 1);
  }

  it("the reasoning-only segment starts, resets, and the retry's text is the Result", async () => {
    const { run, bodies } = await chat(
      provider,
      [reasoningThenCut(), textTurn("Answer.")],
      ["--reasoning-effort", "low", "--events", "jsonl", "think"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(2);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Answer.");
    const flow = withoutStates(events)
      .filter((event) => event.kind.startsWith("ModelStreamSegment") || event.kind === "ModelReasoningDelta")
      .map((event) => ("attempt" in event ? `${event.kind}:${event.attempt}` : event.kind));
    expect(flow).toEqual([
      "ModelStreamSegmentStart:1",
      "ModelReasoningDelta",
      "ModelReasoningDelta",
      "ModelStreamSegmentReset:1",
      "ModelStreamSegmentStart:2",
    ]);
  });
});

describe.each(HOSTED_PROVIDERS)("resets around a tool turn (--provider %s)", (provider) => {
  it("a cut inside the tool call's arguments and a 429 on the next iteration run the tool exactly once", async () => {
    const spec = { toolCalls: [{ id: "call_once", name: "current_time", arguments: '{"unused": true}' }] };
    const full =
      provider === "anthropic"
        ? anthropicTurn(spec, true)
        : provider === "openai-chat"
          ? chatTurnSse(spec)
          : responsesTurnSse(spec);
    if (full.type !== "sse") throw new Error("expected a stream");
    const firstArgumentFragment = full.frames.findIndex((frame) =>
      /input_json_delta|function_call_arguments\.delta|"arguments":"\{/.test(frame),
    );
    expect(firstArgumentFragment).toBeGreaterThan(0);
    const cut = cutAfterFrames(full, firstArgumentFragment + 1);
    const { run, bodies } = await chat(
      provider,
      [
        cut,
        turn(spec),
        providerError(provider, 429, "slow down", { "retry-after-ms": "0" }),
        textTurn("It is noon."),
      ],
      ["--events", "jsonl", "time?"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(4);
    expect(bodies[1]).toEqual(bodies[0]);
    expect(bodies[3]).toEqual(bodies[2]);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("It is noon.");
    expect(events.filter((event) => event.kind === "ToolCallStarted")).toHaveLength(1);
    const resets = events.filter(
      (event): event is Extract<AgentEvent, { kind: "ModelStreamSegmentReset" }> =>
        event.kind === "ModelStreamSegmentReset",
    );
    expect(resets.map((event) => [event.iteration, event.attempt])).toEqual([
      [1, 1],
      [2, 1],
    ]);
    expect(resets[1]?.reason).toMatch(/rate/i);
  });
});

import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { AgentEvent } from "../../src/events/types.js";
import { NetworkError, ServerError } from "../../src/llm/errors.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * The first delta of a segment emits ModelStreamSegmentStart (attempt, 1-based); a reset
 * emits ModelStreamSegmentReset (the attempt that died, its reason) and the next segment is the
 * next attempt. A consumer discards what it rendered for a reset segment.
 */

const STREAM_KINDS = new Set([
  "ModelRequest",
  "ModelStreamSegmentStart",
  "ModelStreamSegmentReset",
  "ModelTextDelta",
  "ModelReasoningDelta",
]);

function streamTrace(events: AgentEvent[]): string[] {
  return events
    .filter((event) => STREAM_KINDS.has(event.kind))
    .map((event) => {
      switch (event.kind) {
        case "ModelStreamSegmentStart":
          return `${event.iteration}:start ${event.attempt}`;
        case "ModelStreamSegmentReset":
          return `${event.iteration}:reset ${event.attempt} ${event.reason} ${event.error.name}`;
        case "ModelTextDelta":
          return `${event.iteration}:text ${event.delta}`;
        case "ModelReasoningDelta":
          return `${event.iteration}:reasoning ${event.delta}`;
        default:
          return `${event.iteration}:request`;
      }
    });
}

const ping = defineTool({
  name: "ping",
  description: "Pings.",
  parameters: z.object({}),
  execute: () => "pong",
});

describe("stream segments", () => {
  it("a retryable failure mid-stream: SegmentReset (attempt 1, reason), then SegmentStart attempt 2", async () => {
    const { agent, events, backend } = await createTestAgent({
      script: [
        {
          reasoningDeltas: ["hmm"],
          deltas: ["Hel", "lo"],
          failAfterDeltas: 2,
          error: new ServerError("overloaded"),
        },
        { deltas: ["Hello", " world"] },
      ],
    });
    const { result } = await agent.chat("greet");
    expect(backend.requests).toHaveLength(2);
    expect(streamTrace(events)).toEqual([
      "1:request",
      "1:start 1",
      "1:reasoning hmm",
      "1:text Hel",
      "1:reset 1 server_error ServerError",
      "1:start 2",
      "1:text Hello",
      "1:text  world",
    ]);
    // Only the surviving segment makes the answer.
    expect(result).toBe("Hello world");
    expect(agent.messages.at(-1)).toEqual({ role: "assistant", content: "Hello world" });
  });

  it("a failure before any delta resets without a segment of its own; every iteration starts at attempt 1", async () => {
    const { agent, events } = await createTestAgent({
      script: [
        { error: new NetworkError("connection reset") },
        { toolCalls: [{ name: "ping" }] },
        { deltas: ["done"] },
      ],
      tools: [ping],
    });
    await agent.chat("go");
    expect(streamTrace(events)).toEqual([
      "1:request",
      "1:reset 1 network NetworkError",
      // A response with no text or reasoning opens no segment.
      "2:request",
      "2:start 1",
      "2:text done",
    ]);
  });
});

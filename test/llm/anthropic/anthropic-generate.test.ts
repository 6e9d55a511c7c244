import { afterEach, describe, expect, it } from "vitest";
import { type FakeAnthropic, startFakeAnthropic } from "../../../src/testing/index.js";
import { anthropicMessageFixture, loadAnthropicMessage } from "../../support/fixtures.js";
import { BUDGET_MODEL, backendFor, requestOf, user } from "./anthropic-test-kit.js";

let server: FakeAnthropic | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("AnthropicBackend.generate (non-streaming)", () => {
  it("returns text, finish reason and usage, from a request without stream", async () => {
    server = await startFakeAnthropic([anthropicMessageFixture("message-text")]);

    const response = await backendFor(server).generate(requestOf([user("Capital of France?")]));

    expect(response).toEqual({
      content: "Paris is the capital of France.",
      toolCalls: [],
      finishReason: "stop",
      usage: { prompt: 21, completion: 9, total: 30, cached: 0 },
    });
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.headers.authorization).toBe("Bearer test-key");
    const body = server.bodies()[0];
    expect(body?.stream).not.toBe(true);
    expect(body).toMatchObject({ model: BUDGET_MODEL, max_tokens: 4096 });
  });

  it("keeps thinking blocks with signatures, serialises tool input, and skips server tool blocks", async () => {
    server = await startFakeAnthropic([anthropicMessageFixture("message-thinking-tool-use")]);
    const fixture = loadAnthropicMessage("message-thinking-tool-use") as {
      content: { type: string; signature?: string; data?: string }[];
    };

    const response = await backendFor(server).generate(
      requestOf([user("Weather?")], { reasoningEffort: "low" }),
    );

    expect(response.thinkingBlocks).toEqual([
      {
        type: "thinking",
        thinking: "I need the weather in Paris.",
        signature: fixture.content[0]?.signature,
      },
      { type: "redacted_thinking", data: fixture.content[1]?.data },
    ]);
    expect(response.reasoningContent).toBe("I need the weather in Paris.");
    expect(response.content).toBe("Checking.");
    expect(response.toolCalls).toEqual([
      {
        id: "toolu_01Hj4kL5mN6pQ7rS8tU9vW0x",
        name: "get_weather",
        arguments: '{"location":"Paris, France","unit":"celsius"}',
      },
    ]);
    expect(response.finishReason).toBe("tool_calls");
    expect(response.usage).toEqual({ prompt: 930, completion: 80, total: 1010, cached: 900 });
  });
});

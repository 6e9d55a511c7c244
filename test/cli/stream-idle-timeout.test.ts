import { afterEach, describe, expect, it } from "vitest";
import {
  chatTurnSse,
  type FakeResponse,
  responsesTurnSse,
  stallAfterFrames,
} from "../../src/testing/index.js";
import {
  anthropicTurn,
  type FakeProvider,
  HOSTED_PROVIDERS,
  type HostedProvider,
  linesOf,
  runCli,
  stackLines,
  startFakeProvider,
} from "../support/cli.js";

/**
 * Regression: a stream that stops mid-answer held its chat for the 30-minute
 * total timeout. With `--stream-idle-timeout` (default 120 s) a stream silent that long fails the
 * chat with a timeout, like the time to first byte: not retried (a retry may bill twice).
 */

let fake: FakeProvider | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

/** A text turn in the provider's stream format that stalls right after its first text delta. */
function stalledTurn(provider: HostedProvider): FakeResponse {
  const text = ["Half an ", "answer that never ends"];
  const reply =
    provider === "anthropic"
      ? anthropicTurn({ text }, true)
      : provider === "openai-chat"
        ? chatTurnSse({ text })
        : responsesTurnSse({ text });
  if (reply.type !== "sse") throw new Error("expected a stream");
  const marker =
    provider === "anthropic" ? '"text_delta"' : provider === "openai-chat" ? "Half an" : "output_text.delta";
  const firstDelta = reply.frames.findIndex((frame) => frame.includes(marker));
  if (firstDelta < 0) throw new Error("no text delta in the stream");
  return stallAfterFrames(reply, firstDelta + 1);
}

describe.each(HOSTED_PROVIDERS)("stream idle timeout with --provider %s", (provider) => {
  it("a stream that stalls mid-answer fails the chat with a timeout, without a retry", async () => {
    fake = await startFakeProvider(provider, [stalledTurn(provider)]);
    const run = await runCli(
      ["chat", "--local", ...fake.flags, "--stream-idle-timeout", "1s", "--events", "jsonl", "hi"],
      { env: fake.env },
    );
    expect(run.code).toBe(1);
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: chat failed: RequestTimeoutError: .*stream idle timeout/);
    expect(stackLines(run.stderr)).toEqual([]);
    // A timeout is never retried.
    expect(fake.bodies()).toHaveLength(1);
    const events = linesOf(run.stdout).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(events.filter((event) => event.kind === "ModelTextDelta").map((event) => event.delta)).toEqual([
      "Half an ",
    ]);
    expect(events.some((event) => event.kind === "ModelStreamSegmentReset")).toBe(false);
    expect(events.find((event) => event.kind === "ChatFailed")).toMatchObject({
      error: { name: "RequestTimeoutError" },
      cancelled: false,
    });
  });
});

describe("--stream-idle-timeout", () => {
  it("is read from AGENTLOOP_STREAM_IDLE_TIMEOUT too", async () => {
    fake = await startFakeProvider("openai-chat", [stalledTurn("openai-chat")]);
    const run = await runCli(["chat", "--local", ...fake.flags, "hi"], {
      env: { ...fake.env, AGENTLOOP_STREAM_IDLE_TIMEOUT: "500ms" },
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/RequestTimeoutError: .*500 ms mid-stream \(stream idle timeout\)/);
  });

  it("refuses a value that is not a duration with one line", async () => {
    for (const value of ["soon", "0s", "30d"]) {
      const run = await runCli(["chat", "--local", "--stream-idle-timeout", value, "hi"]);
      expect(run.code).toBe(2);
      expect(linesOf(run.stderr)).toEqual([
        expect.stringMatching(/^agentloop: --stream-idle-timeout must be /),
      ]);
    }
  });
});

import { describe, expect, it } from "vitest";
import { assign, createActor, fromPromise, setup, waitFor } from "xstate";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import { ContextLengthExceededError, RateLimitError } from "../../src/llm/errors.js";
import { emptyUsage } from "../../src/llm/types.js";
import { type ErrorInfo, errorInfo, isErrorInfo, toErrorInfo } from "../../src/public/errors.js";
import { ToolNotFoundError } from "../../src/tools/tool-errors.js";

describe("toErrorInfo", () => {
  it("keeps an agentloop error's code, retryable, status and class name", () => {
    const error = new RateLimitError("slow down", { statusCode: 429, retryAfterMs: 1_000 });
    expect(toErrorInfo(error)).toEqual({
      code: "rate_limit",
      message: "slow down",
      retryable: true,
      status: 429,
      name: "RateLimitError",
    });
  });

  it("leaves status out when there was none (so the info is equal after a JSON round trip)", () => {
    expect(toErrorInfo(new ToolNotFoundError("grep"))).toEqual({
      code: "tool_not_found",
      message: "tool not found: grep",
      retryable: false,
      name: "ToolNotFoundError",
    });
    expect(Object.keys(toErrorInfo(new ToolNotFoundError("grep")))).not.toContain("status");
  });

  it("turns anything else into internal, not retryable", () => {
    expect(toErrorInfo(new TypeError("x is undefined"))).toEqual({
      code: "internal",
      message: "x is undefined",
      retryable: false,
      name: "TypeError",
    });
    expect(toErrorInfo("boom")).toEqual({
      code: "internal",
      message: "boom",
      retryable: false,
      name: "Error",
    });
    expect(toErrorInfo(undefined)).toMatchObject({ code: "internal", message: "undefined" });
  });

  it("passes ErrorInfo through unchanged, and does not take an object with an unknown code for one", () => {
    const info = errorInfo("context_length_exceeded", "too long", { name: "ContextLengthExceededError" });
    expect(toErrorInfo(info)).toBe(info);
    expect(isErrorInfo({ code: "made_up", message: "m", retryable: false })).toBe(false);
    expect(toErrorInfo({ code: "made_up", message: "m", retryable: false }).code).toBe("internal");
  });

  it("gives a failed chat its cause's code", () => {
    const cause = toErrorInfo(new ContextLengthExceededError("too long", { statusCode: 400 }));
    expect(toErrorInfo(new ChatFailedError(cause, emptyUsage()))).toEqual({
      ...cause,
      name: "ChatFailedError",
    });
  });

  it("survives a JSON round trip", () => {
    const info = toErrorInfo(new RateLimitError("slow down", { statusCode: 429 }));
    const copy: unknown = JSON.parse(JSON.stringify(info));
    expect(copy).toEqual(info);
    expect(isErrorInfo(copy)).toBe(true);
  });

  it("survives a machine's persisted snapshot: restored, the machine still decides on the code", async () => {
    const machine = setup({
      types: { context: {} as { error: ErrorInfo | null } },
      actors: {
        request: fromPromise<string>(() =>
          Promise.reject(new RateLimitError("slow down", { statusCode: 429 })),
        ),
      },
      guards: { isRetryable: ({ context }) => context.error?.retryable === true },
    }).createMachine({
      id: "request",
      context: { error: null },
      initial: "requesting",
      states: {
        requesting: {
          invoke: {
            src: "request",
            onError: {
              target: "failed",
              actions: assign({ error: ({ event }) => toErrorInfo(event.error) }),
            },
          },
        },
        failed: { on: { decide: [{ guard: "isRetryable", target: "retrying" }, { target: "given_up" }] } },
        retrying: { type: "final" },
        given_up: { type: "final" },
      },
    });
    const first = createActor(machine).start();
    await waitFor(first, (snapshot) => snapshot.matches("failed"));
    const persisted = JSON.parse(JSON.stringify(first.getPersistedSnapshot()));
    first.stop();

    const restored = createActor(machine, { snapshot: persisted }).start();
    expect(restored.getSnapshot().context.error).toEqual({
      code: "rate_limit",
      message: "slow down",
      retryable: true,
      status: 429,
      name: "RateLimitError",
    });
    restored.send({ type: "decide" });
    expect(restored.getSnapshot().value).toBe("retrying");
    restored.stop();
  });
});

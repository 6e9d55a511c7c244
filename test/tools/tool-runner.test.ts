import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createSecretRedactor } from "../../src/text/secret-redactor.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";
import {
  CANCELLED_TOOL_RESULT,
  cancelledToolResult,
  runToolCall,
  sanitizeErrorMessage,
  toolResultMessage,
  truncateToolResult,
} from "../../src/tools/tool-runner.js";
import type { ToolSet } from "../../src/tools/tool-set.js";
import { createTestToolContext } from "./tool-context.js";

function setOf(name: string, execute: (args: { n?: number | undefined }) => unknown): ToolSet {
  return createToolSet({
    name,
    tools: [
      defineTool({
        name,
        description: "",
        parameters: z.object({ n: z.number().int().optional() }),
        execute,
      }),
    ],
  });
}

const call = (name: string, args = "{}") => ({ id: `call-${name}`, name, arguments: args });

describe("runToolCall", () => {
  it("returns the result of the set that offers the tool", async () => {
    const sets = [setOf("first", () => "one"), setOf("second", (args) => ({ got: args.n }))];
    const outcome = await runToolCall(call("second", '{"n":3}'), sets, createTestToolContext());
    expect(outcome).toEqual({
      callId: "call-second",
      toolName: "second",
      ok: true,
      cancelled: false,
      result: '{"got":3}',
    });
  });

  it("answers an unknown tool with the standard error result", async () => {
    const outcome = await runToolCall(call("missing"), [setOf("first", () => "")], createTestToolContext());
    expect(outcome.ok).toBe(false);
    expect(outcome.cancelled).toBe(false);
    expect(outcome.result).toBe('{"error":"tool not found: missing"}');
    expect(outcome.error).toEqual({
      code: "tool_not_found",
      retryable: false,
      name: "ToolNotFoundError",
      message: "tool not found: missing",
    });
  });

  it("turns a throwing tool into a sanitised error result without its stack", async () => {
    const thrown = new Error(
      "ENOENT: no such file or directory, open '/home/alice/projects/secret/config.json'\n" +
        "    at Object.openSync (node:fs:573:3)\n" +
        "    at readConfig (/home/alice/projects/secret/src/read-config.ts:12:7)",
    );
    const outcome = await runToolCall(
      call("reader"),
      [
        setOf("reader", () => {
          throw thrown;
        }),
      ],
      createTestToolContext(),
    );
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toEqual({
      code: "internal",
      retryable: false,
      name: "Error",
      message: "ENOENT: no such file or directory, open 'config.json'",
    });
    expect(JSON.parse(outcome.result)).toEqual({
      error: "ENOENT: no such file or directory, open 'config.json'",
    });
    expect(outcome.result).not.toContain("/home");
    expect(outcome.result).not.toContain("    at ");
  });

  it("reports values thrown that are not errors", async () => {
    const rejecting = setOf("rejecting", () => Promise.reject({ code: 7 }));
    const outcome = await runToolCall(call("rejecting"), [rejecting], createTestToolContext());
    expect(outcome.result).toBe(JSON.stringify({ error: '{"code":7}' }));
    expect(outcome.error?.name).toBe("Error");
  });

  it("caps long error messages", async () => {
    const outcome = await runToolCall(
      call("loud"),
      [
        setOf("loud", () => {
          throw new TypeError("x".repeat(5_000));
        }),
      ],
      createTestToolContext(),
    );
    expect(outcome.error?.name).toBe("TypeError");
    expect(outcome.error?.message).toHaveLength(500);
    expect(outcome.error?.message.endsWith("…")).toBe(true);
  });

  it("answers arguments that are not JSON with an error result", async () => {
    const outcome = await runToolCall(call("t", '{"n":'), [setOf("t", () => "")], createTestToolContext());
    expect(outcome.ok).toBe(false);
    expect(outcome.error?.name).toBe("ToolArgumentsError");
    expect(JSON.parse(outcome.result).error).toMatch(/^arguments for tool "t" are not valid JSON: /);
  });

  it("answers arguments that fail the schema with the issues", async () => {
    const outcome = await runToolCall(
      call("t", '{"n":1.5}'),
      [setOf("t", () => "")],
      createTestToolContext(),
    );
    expect(outcome.ok).toBe(false);
    expect(outcome.error?.name).toBe("ToolArgumentsError");
    expect(JSON.parse(outcome.result).error).toMatch(/^invalid arguments for tool "t": n: /);
  });

  it("truncates long results at 8,000 characters with a visible marker", async () => {
    const outcome = await runToolCall(
      call("big"),
      [setOf("big", () => "a".repeat(12_345))],
      createTestToolContext(),
    );
    expect(outcome.ok).toBe(true);
    expect(outcome.result).toBe(
      `${"a".repeat(8_000)}\n…[truncated: 12,345 characters, showing the first 8,000]`,
    );
  });

  it("does not run a tool once the chat is cancelled", async () => {
    let ran = false;
    const controller = new AbortController();
    controller.abort();
    const outcome = await runToolCall(
      call("t"),
      [
        setOf("t", () => {
          ran = true;
        }),
      ],
      createTestToolContext({ signal: controller.signal }),
    );
    expect(ran).toBe(false);
    expect(outcome).toEqual({
      callId: "call-t",
      toolName: "t",
      ok: false,
      cancelled: true,
      result: CANCELLED_TOOL_RESULT,
      error: { code: "tool_cancelled", retryable: false, name: "ToolCancelledError", message: "cancelled" },
    });
  });

  it("resolves as cancelled at once when aborted mid-run, even if the tool ignores the signal", async () => {
    const controller = new AbortController();
    let started!: () => void;
    const hasStarted = new Promise<void>((resolve) => {
      started = resolve;
    });
    const stuck = setOf("stuck", () => {
      started();
      return new Promise(() => {});
    });
    const pending = runToolCall(call("stuck"), [stuck], createTestToolContext({ signal: controller.signal }));
    await hasStarted;
    controller.abort();
    const outcome = await pending;
    expect(outcome.cancelled).toBe(true);
    expect(outcome.result).toBe(CANCELLED_TOOL_RESULT);
  });

  it("reports a tool that fails because of the abort as cancelled, not failed", async () => {
    const controller = new AbortController();
    const polite = setOf("polite", () => {
      controller.abort();
      throw new Error("This operation was aborted");
    });
    const outcome = await runToolCall(
      call("polite"),
      [polite],
      createTestToolContext({ signal: controller.signal }),
    );
    expect(outcome.cancelled).toBe(true);
    expect(outcome.error?.name).toBe("ToolCancelledError");
  });
});

describe("runToolCall: what may not reach the model", () => {
  const KEY = "sk-live-0123456789";
  const redactor = createSecretRedactor([KEY]);

  it("redacts configured secrets from a result and from an error message", async () => {
    const leaky = await runToolCall(
      call("env"),
      [setOf("env", () => `OPENAI_API_KEY=${KEY}`)],
      createTestToolContext(),
      { redactor },
    );
    expect(leaky.result).toBe("OPENAI_API_KEY=[redacted]");
    const failing = await runToolCall(
      call("fail"),
      [
        setOf("fail", () => {
          throw new Error(`401: bad key ${KEY}`);
        }),
      ],
      createTestToolContext(),
      { redactor },
    );
    expect(failing.error?.message).toBe("401: bad key [redacted]");
    expect(failing.result).not.toContain(KEY);
  });

  it("redacts before cutting, so a cut cannot leave half a secret", async () => {
    const outcome = await runToolCall(
      call("big"),
      [setOf("big", () => `${"a".repeat(7_990)}${KEY}`)],
      createTestToolContext(),
      { redactor },
    );
    // Cut first, the result would have ended in "sk-live-01": a prefix no redaction matches.
    expect(outcome.result).toBe(`${"a".repeat(7_990)}[redacted]`);
  });

  it("replaces lone surrogates in a result with U+FFFD", async () => {
    const outcome = await runToolCall(
      call("half"),
      [setOf("half", () => "half \ud83d emoji")],
      createTestToolContext(),
    );
    expect(outcome.result).toBe("half \ufffd emoji");
  });

  it("cuts a long error message on whole characters", async () => {
    const outcome = await runToolCall(
      call("emoji"),
      [
        setOf("emoji", () => {
          throw new Error(`${"x".repeat(498)}😀😀`);
        }),
      ],
      createTestToolContext(),
    );
    expect(outcome.error?.message).toBe(`${"x".repeat(498)}…`);
    expect(outcome.error?.message.isWellFormed()).toBe(true);
  });
});

describe("tool result messages", () => {
  it("links a result to its call", () => {
    const message = toolResultMessage({
      callId: "c9",
      toolName: "t",
      ok: true,
      cancelled: false,
      result: "done",
    });
    expect(message).toEqual({ role: "tool", toolCallId: "c9", toolName: "t", content: "done" });
  });

  it("back-fills an unfinished call with the cancelled result", () => {
    expect(cancelledToolResult("c1", "slow")).toEqual({
      role: "tool",
      toolCallId: "c1",
      toolName: "slow",
      content: '{"error":"cancelled"}',
    });
  });
});

describe("truncateToolResult", () => {
  it("leaves results up to the limit alone", () => {
    const text = "b".repeat(8_000);
    expect(truncateToolResult(text)).toBe(text);
    expect(truncateToolResult("abcdef", 6)).toBe("abcdef");
  });

  it("never cuts a surrogate pair in half", () => {
    const text = `${"a".repeat(4)}😀${"b".repeat(10)}`;
    expect(truncateToolResult(text, 5)).toBe("aaaa\n…[truncated: 16 characters, showing the first 4]");
  });
});

describe("sanitizeErrorMessage", () => {
  it("reduces host paths to base names but leaves URLs and ratios alone", () => {
    expect(
      sanitizeErrorMessage(
        new Error(
          "failed /var/lib/app/data.db and file:///opt/x/y/mod.js via https://api.example.com/v1/items and/or 3/4",
        ),
      ),
    ).toBe("failed data.db and mod.js via https://api.example.com/v1/items and/or 3/4");
    expect(sanitizeErrorMessage(new Error("cannot open C:\\Users\\bob\\secret\\notes.txt"))).toBe(
      "cannot open notes.txt",
    );
  });

  it("keeps file:line positions after the base name", () => {
    expect(sanitizeErrorMessage("boom at (/srv/app/src/tool.ts:10:5)")).toBe("boom at (tool.ts:10:5)");
  });

  it("joins message lines and falls back to the error name when nothing is left", () => {
    expect(sanitizeErrorMessage(new Error("first line\n\n  second line  "))).toBe("first line second line");
    expect(sanitizeErrorMessage(new RangeError(""))).toBe("RangeError");
  });
});

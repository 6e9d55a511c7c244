import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { createAgent } from "../../src/agent/create-agent.js";
import { SessionActor } from "../../src/host/session-actor.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import {
  BackgroundTasks,
  formatTaskResult,
  TASK_RESULT_MAX_CHARS,
  TASK_RESULT_TYPE,
} from "../../src/tools/background-tasks.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { BackgroundTaskCancelledError, ToolError } from "../../src/tools/tool-errors.js";
import { lastUserText } from "../host/host-fixture.js";
import { createDeferred, type Deferred } from "../support/agent-harness.js";
import { createTestToolContext } from "./tool-context.js";

describe("formatTaskResult", () => {
  it("wraps the output in an escaped task_result element", () => {
    expect(formatTaskResult({ id: "task-1", status: "completed", output: `a < b & "c" > 'd'` })).toBe(
      `<task_result id="task-1" status="completed">a &lt; b &amp; &quot;c&quot; &gt; &apos;d&apos;</task_result>`,
    );
    expect(formatTaskResult({ id: "t2", status: "failed", output: "boom", label: "make <all>" })).toBe(
      `<task_result id="t2" status="failed" label="make &lt;all&gt;">boom</task_result>`,
    );
  });

  it("caps the whole message at 2,000 characters with a marker, never cutting an entity", () => {
    const long = formatTaskResult({ id: "t", status: "completed", output: "x".repeat(5_000) });
    expect(long).toHaveLength(TASK_RESULT_MAX_CHARS);
    expect(long).toContain("[truncated 5000 characters of output]");
    fc.assert(
      fc.property(fc.string({ maxLength: 3_000 }), fc.string({ maxLength: 300 }), (output, label) => {
        const text = formatTaskResult({ id: "task-9", status: "completed", output, label });
        expect(text.length).toBeLessThanOrEqual(TASK_RESULT_MAX_CHARS);
        expect(text.startsWith('<task_result id="task-9" status="completed"')).toBe(true);
        expect(text.endsWith("</task_result>")).toBe(true);
        const body = text.slice(text.indexOf(">") + 1, -"</task_result>".length);
        expect(body).not.toMatch(/[<>]/);
        // Every & starts a whole entity.
        expect(body.replace(/&(amp|lt|gt|quot|apos);/g, "")).not.toContain("&");
      }),
      { numRuns: 300 },
    );
  });

  it("never cuts an emoji in half, in the output or the label", () => {
    const output = "😀".repeat(3_000);
    for (let maxChars = 150; maxChars < 160; maxChars++) {
      const text = formatTaskResult(
        { id: "t", status: "completed", output, label: "😀".repeat(150) },
        maxChars,
      );
      expect(text.isWellFormed()).toBe(true);
    }
    expect(
      formatTaskResult({
        id: "t",
        status: "completed",
        output: "x",
        label: `${"a".repeat(199)}😀`,
      }).isWellFormed(),
    ).toBe(true);
  });
});

describe("BackgroundTasks", () => {
  it("returns a task id at once and posts the result as a stackable task_result message", async () => {
    const post = vi.fn();
    const tasks = new BackgroundTasks({ createId: () => "task-1" });
    const work = createDeferred<string>();
    const id = tasks.start(createTestToolContext({ post }), () => work.promise, { label: "build" });
    expect(id).toBe("task-1");
    expect(tasks.running).toEqual(["task-1"]);
    expect(post).not.toHaveBeenCalled();
    work.resolve("built");
    await vi.waitFor(() => expect(post).toHaveBeenCalledTimes(1));
    expect(post).toHaveBeenCalledWith(
      '<task_result id="task-1" status="completed" label="build">built</task_result>',
      {
        type: TASK_RESULT_TYPE,
        stackable: true,
      },
    );
    expect(tasks.running).toEqual([]);
  });

  it("reports a failed task and a cancelled one; cancelAll stays silent", async () => {
    const post = vi.fn();
    let next = 0;
    const tasks = new BackgroundTasks({ createId: () => `t${++next}` });
    const context = createTestToolContext({ post });
    tasks.start(context, async () => {
      throw new Error("disk full");
    });
    const aborted = (signal: AbortSignal) =>
      new Promise<string>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
    const second = tasks.start(context, aborted);
    tasks.start(context, aborted);
    expect(tasks.cancel(second)).toBe(true);
    await vi.waitFor(() => expect(post).toHaveBeenCalledTimes(2));
    tasks.cancelAll();
    await new Promise((resolve) => setImmediate(resolve));
    expect(post.mock.calls.map(([text]) => text)).toEqual([
      '<task_result id="t1" status="failed">disk full</task_result>',
      '<task_result id="t2" status="cancelled">the task was cancelled</task_result>',
    ]);
    expect(tasks.running).toEqual([]);
  });

  it("aborts the work's signal with a typed reason: cancelled by id, or dropped by a reset", () => {
    let next = 0;
    const tasks = new BackgroundTasks({ createId: () => `t${++next}` });
    const context = createTestToolContext({ post: vi.fn() });
    const signals: AbortSignal[] = [];
    const work = (signal: AbortSignal) => {
      signals.push(signal);
      return new Promise<string>(() => {});
    };
    tasks.start(context, work);
    tasks.start(context, work);
    tasks.cancel("t1");
    tasks.cancelAll();
    const [cancelled, reset] = signals.map((signal) => signal.reason as unknown);
    expect(cancelled).toBeInstanceOf(BackgroundTaskCancelledError);
    expect(cancelled).toMatchObject({ code: "tool_cancelled", taskId: "t1", reason: "cancelled" });
    expect(reset).toBeInstanceOf(BackgroundTaskCancelledError);
    expect(reset).toMatchObject({ code: "tool_cancelled", taskId: "t2", reason: "reset" });
    expect((reset as Error).message).toBe("the session was reset");
  });

  it("refuses to start without a session host to report to", () => {
    const tasks = new BackgroundTasks();
    expect(() => tasks.start(createTestToolContext(), async () => "x")).toThrow(ToolError);
  });
});

describe("a background task's result in a session", () => {
  /** A session whose model starts jobs (`start <name>`) and acknowledges task results. */
  async function startSession() {
    const jobs = new Map<string, Deferred<string>>();
    const gate = createDeferred<string>();
    const tasks = new BackgroundTasks({ createId: () => `task-${jobs.size}` });
    const toolSet = createToolSet({
      name: "jobs",
      tools: [
        defineTool({
          name: "start_job",
          description: "Starts a job in the background.",
          parameters: z.object({ name: z.string() }),
          execute: ({ name }, context) => {
            const job = createDeferred<string>();
            jobs.set(name, job);
            return `started ${tasks.start(context, () => job.promise)}`;
          },
        }),
        defineTool({
          name: "wait",
          description: "Waits until the test opens the gate.",
          parameters: z.object({}),
          execute: () => gate.promise,
        }),
      ],
    });
    const script = (request: ScriptedRequest): ScriptedStep => {
      const last = request.messages.at(-1);
      if (last?.role === "tool") return { text: last.toolName === "wait" ? "waited" : "started it" };
      const text = lastUserText(request);
      const start = /^start (\w+)$/.exec(text);
      if (start) return { toolCalls: [{ name: "start_job", arguments: { name: start[1] } }] };
      if (text === "wait") return { toolCalls: [{ name: "wait" }] };
      return { text: `noted: ${text}` };
    };
    const backend = new ScriptedBackend(script);
    let actor: SessionActor | undefined;
    const agent = await createAgent({
      name: "bot",
      session: "s1",
      llm: new RetryingLlmClient({ backend, maxAttempts: 1 }),
      model: "scripted",
      toolSets: [toolSet],
      post: (text, options) => actor?.post(text, options),
    });
    actor = new SessionActor({ agent });
    return { actor, backend, jobs, gate, tasks };
  }

  it("arrives as a new message the model sees on its next turn", async () => {
    const { actor, backend, jobs } = await startSession();
    expect(await actor.chatAndWait("start build")).toMatchObject({ ok: true, result: "started it" });
    jobs.get("build")?.resolve("build ok & tested");
    await vi.waitFor(() => expect(backend.requests).toHaveLength(3));
    await actor.whenIdle();
    expect(lastUserText(backend.requests[2]!)).toBe(
      '<task_result id="task-1" status="completed">build ok &amp; tested</task_result>',
    );
  });

  it("coalesces results that arrive while the session is busy: the model sees the latest", async () => {
    const { actor, backend, jobs, gate, tasks } = await startSession();
    await actor.chatAndWait("start first");
    await actor.chatAndWait("start second");
    const busy = actor.chatAndWait("wait");
    jobs.get("first")?.resolve("one");
    jobs.get("second")?.resolve("two");
    // Both results posted (a result is posted in the same step its task leaves `running`).
    await vi.waitFor(() => expect(tasks.running).toEqual([]));
    expect(actor.queueLength).toBe(1);
    gate.resolve("opened");
    expect(await busy).toMatchObject({ ok: true, result: "waited" });
    await vi.waitFor(() => expect(backend.requests).toHaveLength(7));
    await actor.whenIdle();
    const userTexts = backend.requests.map(lastUserText);
    expect(userTexts.at(-1)).toBe('<task_result id="task-2" status="completed">two</task_result>');
    expect(userTexts.join("\n")).not.toContain(">one<");
  });
});

import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { AgentEvent, EventBody } from "../../src/events/types.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { iterationLikeMachine, loopLikeMachine } from "../viz/test-machines.js";
import { createGate, type ScriptedAgent, startScriptedAgent } from "./scripted-agent.js";
import { launchChromium } from "./support/launch-chromium.js";
import { createEventFactory, publishEvents } from "./ui-helpers.js";

/**
 * The page in headless Chromium (Debian's, driven by playwright-core) against an in-process UI
 * server on a LocalBus, with a scripted agent streaming a realistic chat: a reset segment, two
 * tool calls (one failing), a final turn, and StateChanged events for the live statechart.
 */

const ARTIFACTS = "test-artifacts";
const PREFIX = "agentloop";
const usage = { prompt: 30, completion: 12, total: 42, cached: 8 };

const gate1 = createGate();
const gate2 = createGate();

function chatScript(text: string) {
  const chat = (state: unknown): { body: EventBody } => ({
    body: { kind: "StateChanged", machine: "chat", state },
  });
  const iteration = (state: unknown, n: number) => ({
    body: { kind: "StateChanged", machine: "iteration", state } as EventBody,
    iteration: n,
  });
  return [
    {
      events: [
        chat("preparing"),
        { body: { kind: "ChatStarted", text } as EventBody },
        chat({ iterating: "turn" }),
        iteration("streaming", 1),
        { body: { kind: "ModelRequest", final: false, messageCount: 2 } as EventBody, iteration: 1 },
        { body: { kind: "ModelStreamSegmentStart", attempt: 1 } as EventBody, iteration: 1 },
        { body: { kind: "ModelTextDelta", delta: "Let me chec" } as EventBody, iteration: 1 },
        { body: { kind: "ModelTextDelta", delta: "k the clock" } as EventBody, iteration: 1 },
      ],
      gate: gate1.promise,
    },
    {
      events: [
        {
          body: {
            kind: "ModelStreamSegmentReset",
            attempt: 1,
            reason: "server_error",
            error: { code: "server_error", retryable: true, name: "ServerError", message: "529 overloaded" },
          } as EventBody,
          iteration: 1,
        },
        { body: { kind: "ModelStreamSegmentStart", attempt: 2 } as EventBody, iteration: 1 },
        { body: { kind: "ModelReasoningDelta", delta: "The user wants " } as EventBody, iteration: 1 },
        { body: { kind: "ModelReasoningDelta", delta: "the time." } as EventBody, iteration: 1 },
        { body: { kind: "ModelTextDelta", delta: "Checking " } as EventBody, iteration: 1 },
        { body: { kind: "ModelTextDelta", delta: "the time." } as EventBody, iteration: 1 },
        iteration("assembling", 1),
        iteration("executingTools", 1),
        {
          body: {
            kind: "ToolCallStarted",
            toolName: "current_time",
            toolCallId: "call_1",
            arguments: "{}",
          } as EventBody,
          iteration: 1,
        },
        {
          body: {
            kind: "ToolCallStarted",
            toolName: "ask_agent",
            toolCallId: "call_2",
            arguments: '{"agent":"helper","message":"what time is it?"}',
          } as EventBody,
          iteration: 1,
        },
        {
          body: {
            kind: "ToolCallCompleted",
            toolName: "current_time",
            toolCallId: "call_1",
            result: "2025-01-01T12:00:00+00:00",
            durationMs: 3,
          } as EventBody,
          iteration: 1,
        },
        {
          body: {
            kind: "ToolCallFailed",
            toolName: "ask_agent",
            toolCallId: "call_2",
            error: {
              code: "tool",
              retryable: false,
              name: "ToolError",
              message: "agent helper is not available",
            },
            result: '{"error":"agent helper is not available"}',
            durationMs: 12,
          } as EventBody,
          iteration: 1,
        },
        iteration("toolsDone", 1),
        chat({ iterating: "finalTurn" }),
        iteration("streaming", 2),
        { body: { kind: "ModelRequest", final: true, messageCount: 6 } as EventBody, iteration: 2 },
        { body: { kind: "ModelStreamSegmentStart", attempt: 1 } as EventBody, iteration: 2 },
        { body: { kind: "ModelTextDelta", delta: "It is noon " } as EventBody, iteration: 2 },
        { body: { kind: "ModelTextDelta", delta: "(UTC)." } as EventBody, iteration: 2 },
      ],
      gate: gate2.promise,
    },
    {
      events: [
        iteration("answered", 2),
        chat("measuring"),
        chat("appending"),
        chat("done"),
        { body: { kind: "ChatCompleted", result: "It is noon (UTC).", usage, tokenUsed: 42 } as EventBody },
      ],
    },
  ];
}

let bus: LocalBus;
let server: UiServer;
let browser: Browser;
let page: Page;
let agent: ScriptedAgent;
const pageErrors: string[] = [];

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  bus = new LocalBus();
  const machines = { chat: loopLikeMachine, iteration: iterationLikeMachine } as const;
  server = await startUiServer({
    bus,
    getMachine: (name) => machines[name as keyof typeof machines],
    machineNames: ["chat", "iteration"],
  });
  agent = startScriptedAgent(bus, { prefix: PREFIX, agent: "bot", script: chatScript });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
});

afterAll(async () => {
  gate1.open();
  gate2.open();
  await browser?.close();
  agent?.stop();
  await server?.close();
  await bus?.close();
});

const byTestId = (id: string) => `[data-testid="${id}"]`;

async function classesOf(stateId: string): Promise<string[]> {
  const value = await page
    .locator(`[data-testid="statechart"] [data-state-id="${stateId}"]`)
    .first()
    .getAttribute("class");
  return (value ?? "").split(/\s+/);
}

async function transcriptText(): Promise<string> {
  return (await page.locator(byTestId("transcript")).textContent()) ?? "";
}

describe("the UI page", () => {
  it("shows the chat as it streams, the retry, the tool calls and the live state", async () => {
    await page.goto(server.url);
    await expect.poll(() => page.locator(byTestId("connection-status")).textContent()).toBe("live");
    await expect.poll(() => page.locator(byTestId("bus-kind")).textContent()).toBe("bus: local");
    await page.locator(`${byTestId("chart-chat")}[data-loaded="true"]`).waitFor();

    await page.fill(byTestId("composer-agent"), "bot");
    await page.fill(byTestId("composer-session"), "s1");
    await page.fill(byTestId("composer-text"), "What time is it?");
    await page.click(byTestId("send-button"));

    // Step 1: the first segment streams.
    const item = page.locator(`${byTestId("session-item")}[data-agent="bot"][data-session="s1"]`);
    await item.waitFor();
    expect(await item.getAttribute("aria-selected")).toBe("true");
    await expect.poll(() => page.locator(byTestId("user-message")).textContent()).toBe("What time is it?");
    await expect.poll(transcriptText).toContain("Let me check the clock");
    await expect.poll(() => classesOf("chat.iterating.turn")).toContain("active-leaf");
    expect(await classesOf("chat.iterating")).toContain("active");
    expect(await classesOf("chat.preparing")).not.toContain("active");
    await expect.poll(() => item.locator(byTestId("session-status")).textContent()).toBe("running");
    expect(await page.locator(byTestId("selected-state")).textContent()).toBe(
      "chat: iterating.turn · iteration: streaming",
    );
    await page.screenshot({ path: `${ARTIFACTS}/ui-1-streaming.png` });
    gate1.open();

    // Step 2: the reset segment is gone and marked; tools ran; the final turn streams.
    await expect.poll(transcriptText).toContain("It is noon (UTC).");
    const reset = page.locator(byTestId("segment-reset"));
    expect(await reset.count()).toBe(1);
    expect(await reset.textContent()).toBe("retried: server_error");
    expect(await reset.getAttribute("title")).toBe("ServerError: 529 overloaded");
    expect(await transcriptText()).not.toContain("Let me check the clock");
    expect(await page.locator(byTestId("assistant-text")).allTextContents()).toEqual([
      "Checking the time.",
      "It is noon (UTC).",
    ]);
    const reasoning = page.locator(byTestId("reasoning"));
    expect(await reasoning.count()).toBe(1);
    expect(await reasoning.getAttribute("open")).toBeNull();
    expect(await reasoning.textContent()).toContain("The user wants the time.");

    const timeCall = page.locator(`${byTestId("tool-call")}[data-tool-call-id="call_1"]`);
    expect(await timeCall.getAttribute("data-status")).toBe("completed");
    expect(await timeCall.locator(byTestId("tool-result")).textContent()).toBe("2025-01-01T12:00:00+00:00");
    expect(await timeCall.locator(byTestId("tool-status")).textContent()).toBe("done · 3 ms");
    const askCall = page.locator(`${byTestId("tool-call")}[data-tool-call-id="call_2"]`);
    expect(await askCall.getAttribute("data-status")).toBe("failed");
    expect(await askCall.locator(byTestId("tool-args")).textContent()).toContain('"agent": "helper"');
    expect(await askCall.locator(byTestId("tool-error")).textContent()).toBe(
      "ToolError: agent helper is not available",
    );
    expect(await page.locator(`${byTestId("turn")}[data-iteration="2"]`).textContent()).toContain(
      "final answer",
    );

    await expect.poll(() => classesOf("chat.iterating.finalTurn")).toContain("active-leaf");
    expect(await classesOf("chat.iterating.turn")).not.toContain("active");
    await page.click(byTestId("statechart-tab-iteration"));
    await page.locator(`${byTestId("chart-iteration")}[data-loaded="true"]`).waitFor();
    // Iteration 2 is streaming (its StateChanged came after toolsDone of iteration 1).
    await expect.poll(() => classesOf("iteration.streaming")).toContain("active-leaf");
    expect(await classesOf("iteration.toolsDone")).not.toContain("active");
    await page.screenshot({ path: `${ARTIFACTS}/ui-2-tools-and-retry.png` });
    await page.click(byTestId("statechart-tab-chat"));
    gate2.open();

    // Step 3: done, usage shown, the reply reached the composer.
    await expect.poll(() => page.locator(byTestId("chat-usage")).textContent()).toContain("total 42");
    await expect
      .poll(() => page.locator(byTestId("control-status")).textContent())
      .toContain("reply from bot / s1");
    await expect.poll(() => classesOf("chat.done")).toContain("active-leaf");
    expect(await classesOf("chat.iterating")).not.toContain("active");
    await expect.poll(() => item.locator(byTestId("session-status")).textContent()).toBe("completed");
    await page.screenshot({ path: `${ARTIFACTS}/ui-3-done.png` });
    expect(agent.chats).toEqual([{ session: "s1", text: "What time is it?" }]);
  });

  it("lists a new session as it starts and replays a session's history when selected", async () => {
    const make = createEventFactory("helper", "s2", "other-chat");
    // The session starts on host-1 and is taken over by host-2: the list shows the latest owner.
    const on = (host: string, event: AgentEvent): AgentEvent => ({ ...event, host });
    publishEvents(bus, PREFIX, [
      on("host-1", make({ kind: "ChatStarted", text: "status report" })),
      on("host-1", make({ kind: "ModelTextDelta", delta: "All " }, 1)),
      on("host-2", make({ kind: "ModelTextDelta", delta: "good." }, 1)),
      on(
        "host-2",
        make({
          kind: "ChatFailed",
          error: { code: "server_error", retryable: true, name: "LlmError", message: "boom" },
          cancelled: false,
        }),
      ),
    ]);
    const item = page.locator(`${byTestId("session-item")}[data-agent="helper"][data-session="s2"]`);
    await item.waitFor();
    await expect.poll(() => item.locator(byTestId("session-status")).textContent()).toBe("failed");
    expect(await item.locator(byTestId("session-host")).textContent()).toBe("on host-2");
    expect(await item.locator(byTestId("session-host")).isVisible()).toBe(true);
    // The scripted agent's events name no host: nothing is shown for s1.
    const first = page.locator(`${byTestId("session-item")}[data-session="s1"]`);
    expect(await first.locator(byTestId("session-host")).isVisible()).toBe(false);
    // The server's summaries carry it too (the list after a reload).
    const listed = (await (await fetch(new URL("/api/sessions", server.url))).json()) as {
      sessions: Array<{ session: string; host?: string }>;
    };
    expect(listed.sessions.find((summary) => summary.session === "s2")?.host).toBe("host-2");
    // Newest first.
    expect(await page.locator(byTestId("session-item")).first().getAttribute("data-session")).toBe("s2");

    await item.click();
    await expect.poll(() => page.locator(byTestId("user-message")).textContent()).toBe("status report");
    expect(await page.locator(byTestId("assistant-text")).allTextContents()).toEqual(["All good."]);
    expect(await page.locator(byTestId("chat-error")).textContent()).toBe("failed: LlmError: boom");

    // Back to the first session: rebuilt from the server's buffer, reset and all.
    await page.locator(`${byTestId("session-item")}[data-session="s1"]`).click();
    await expect.poll(() => page.locator(byTestId("user-message")).textContent()).toBe("What time is it?");
    expect(await page.locator(byTestId("assistant-text")).allTextContents()).toEqual([
      "Checking the time.",
      "It is noon (UTC).",
    ]);
    expect(await page.locator(byTestId("segment-reset")).textContent()).toBe("retried: server_error");
    expect(await page.locator(byTestId("tool-call")).count()).toBe(2);
    await expect.poll(() => classesOf("chat.done")).toContain("active-leaf");
  });

  it("sends stop, new and compact with a topic to the selected session", async () => {
    await page.click(byTestId("stop-button"));
    await expect.poll(() => page.locator(byTestId("control-status")).textContent()).toBe("stop: done");
    await page.click(byTestId("new-button"));
    await expect.poll(() => page.locator(byTestId("control-status")).textContent()).toBe("new: done");
    await page.fill(byTestId("compact-topic"), "the clock");
    await page.click(byTestId("compact-button"));
    await expect.poll(() => page.locator(byTestId("control-status")).textContent()).toBe("compact: done");
    expect(agent.controls).toEqual([
      { session: "s1", command: "stop" },
      { session: "s1", command: "new" },
      { session: "s1", command: "compact", topic: "the clock" },
    ]);
    expect(pageErrors).toEqual([]);
  });
});

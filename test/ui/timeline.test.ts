import { mkdirSync } from "node:fs";
import { jetstreamManager } from "@nats-io/jetstream";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureEventStream, eventStreamName } from "../../src/bus/event-log.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import type { EventBody } from "../../src/events/types.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { workerNatsServer } from "../support/nats-server.js";
import { iterationLikeMachine, loopLikeMachine } from "../viz/test-machines.js";
import { createGate, type ScriptStep, startScriptedAgent } from "./scripted-agent.js";
import { launchChromium } from "./support/launch-chromium.js";
import { createEventFactory, publishEvents } from "./ui-helpers.js";

/**
 * The chat timeline beside the transcript, in headless Chromium: a scripted chat of two iterations
 * (a reset and retry in the first request, three tool calls of which one fails, a final request,
 * then a compaction) drawn live step by step, and the same chat replayed from the JetStream log.
 */

const ARTIFACTS = "test-artifacts";
const PREFIX = "agentloop";
const usage1 = { prompt: 1000, completion: 50, total: 1050, cached: 200 };
const usage2 = { prompt: 1300, completion: 80, total: 1380, cached: 1000 };
const total = { prompt: 3700, completion: 170, total: 3870, cached: 1200 };
const FAILED_RED = "rgb(185, 28, 28)";
const DONE_GREEN = "rgb(22, 163, 74)";

type Step = Array<{ body: EventBody; iteration?: number }>;

const iterationState = (state: string, iteration: number) => ({
  body: { kind: "StateChanged", machine: "iteration", state } as EventBody,
  iteration,
});
const toolStarted = (toolName: string, toolCallId: string) => ({
  body: { kind: "ToolCallStarted", toolName, toolCallId, arguments: "{}" } as EventBody,
  iteration: 1,
});
const toolCompleted = (toolName: string, toolCallId: string, durationMs: number) => ({
  body: { kind: "ToolCallCompleted", toolName, toolCallId, result: "ok", durationMs } as EventBody,
  iteration: 1,
});

/** The chat in three steps, as a host publishes it (a pause after the first two). */
function chatSteps(text: string): [Step, Step, Step] {
  return [
    [
      {
        body: {
          kind: "ChatStarted",
          text,
          tokenUsed: 0,
          tokenLimit: 4000,
          contextCompactRatio: 0.7,
        } as EventBody,
      },
      iterationState("streaming", 1),
      { body: { kind: "ModelRequest", final: false, messageCount: 2 } as EventBody, iteration: 1 },
      { body: { kind: "ModelStreamSegmentStart", attempt: 1 } as EventBody, iteration: 1 },
      { body: { kind: "ModelTextDelta", delta: "Let me " } as EventBody, iteration: 1 },
      { body: { kind: "ModelTextDelta", delta: "look." } as EventBody, iteration: 1 },
    ],
    [
      {
        body: {
          kind: "ModelStreamSegmentReset",
          attempt: 1,
          reason: "server_error",
          error: { name: "ServerError", message: "529 overloaded" },
        } as EventBody,
        iteration: 1,
      },
      { body: { kind: "ModelStreamSegmentStart", attempt: 2 } as EventBody, iteration: 1 },
      { body: { kind: "ModelTextDelta", delta: "Checking." } as EventBody, iteration: 1 },
      {
        body: {
          kind: "ModelResponse",
          content: "Checking.",
          toolCalls: 3,
          usage: usage1,
          purpose: "chat",
        } as EventBody,
        iteration: 1,
      },
      iterationState("assembling", 1),
      iterationState("executingTools", 1),
      toolStarted("current_time", "call_1"),
      toolStarted("ask_agent", "call_2"),
      toolCompleted("current_time", "call_1", 180),
      toolStarted("todo_list", "call_3"),
      {
        body: {
          kind: "ToolCallFailed",
          toolName: "ask_agent",
          toolCallId: "call_2",
          error: { name: "ToolError", message: "agent helper is not available" },
          result: '{"error":"agent helper is not available"}',
          durationMs: 290,
        } as EventBody,
        iteration: 1,
      },
      toolCompleted("todo_list", "call_3", 190),
      iterationState("toolsDone", 1),
      iterationState("streaming", 2),
      { body: { kind: "ModelRequest", final: true, messageCount: 6 } as EventBody, iteration: 2 },
      { body: { kind: "ModelStreamSegmentStart", attempt: 1 } as EventBody, iteration: 2 },
      { body: { kind: "ModelTextDelta", delta: "It is noon." } as EventBody, iteration: 2 },
    ],
    [
      {
        body: {
          kind: "ModelResponse",
          content: "It is noon.",
          toolCalls: 0,
          usage: usage2,
          purpose: "chat",
        } as EventBody,
        iteration: 2,
      },
      iterationState("answered", 2),
      { body: { kind: "ContextCompaction", phase: "started" } as EventBody },
      {
        body: {
          kind: "ModelResponse",
          content: "Summary.",
          toolCalls: 0,
          usage: { prompt: 1400, completion: 40, total: 1440, cached: 0 },
          purpose: "compaction",
        } as EventBody,
      },
      { body: { kind: "ContextCompaction", phase: "completed", tokenUsed: 40 } as EventBody },
      {
        body: {
          kind: "ChatCompleted",
          result: "It is noon.",
          usage: total,
          tokenUsed: 40,
          tokenLimit: 4000,
        } as EventBody,
      },
    ],
  ];
}

const byTestId = (id: string) => `[data-testid="${id}"]`;

/** What the timeline shows, in document order, with each bar's horizontal extent. */
interface TimelineShape {
  iterations: Array<{ iteration: string; left: number; right: number }>;
  requests: Array<{
    iteration: string;
    status: string;
    attempts: string;
    resets: number;
    left: number;
    right: number;
  }>;
  /** Left to right. */
  tools: Array<{ id: string; status: string; lane: string; colour: string; left: number }>;
  tokens: Array<{ iteration: string; total: string; height: number }>;
  waits: Array<{ kind: string; status: string }>;
  gauge: { ratio: string; threshold: string; text: string };
  summary: string;
}

function timelineShape(page: Page): Promise<TimelineShape> {
  return page.evaluate(() => {
    const root = document.querySelector('[data-testid="timeline"]')!;
    // NodeLists through Array.from: the project's lib has DOM but not DOM.Iterable.
    const all = (id: string) => Array.from(root.querySelectorAll(`[data-testid="${id}"]`));
    const attribute = (node: Element, name: string) => node.getAttribute(name) ?? "";
    const box = (node: Element) => node.getBoundingClientRect();
    const gauge = root.querySelector('[data-testid="timeline-gauge"]');
    return {
      iterations: all("timeline-iteration").map((node) => ({
        iteration: attribute(node, "data-iteration"),
        left: box(node).left,
        right: box(node).right,
      })),
      requests: all("timeline-request").map((node) => ({
        iteration: attribute(node, "data-iteration"),
        status: attribute(node, "data-status"),
        attempts: attribute(node, "data-attempts"),
        resets: node.querySelectorAll('[data-testid="timeline-reset"]').length,
        left: box(node).left,
        right: box(node).right,
      })),
      // Drawn lane by lane: put them in the order they start on the page.
      tools: all("timeline-tool")
        .sort((a, b) => box(a).left - box(b).left)
        .map((node) => ({
          id: attribute(node, "data-tool-call-id"),
          status: attribute(node, "data-status"),
          lane: attribute(node, "data-lane"),
          colour: getComputedStyle(node).backgroundColor,
          left: box(node).left,
        })),
      tokens: all("timeline-token-bar").map((node) => ({
        iteration: attribute(node, "data-iteration"),
        total: attribute(node, "data-total"),
        height: box(node.querySelector(".tl-token-stack")!).height,
      })),
      waits: all("timeline-wait").map((node) => ({
        kind: attribute(node, "data-kind"),
        status: attribute(node, "data-status"),
      })),
      gauge: {
        ratio: gauge ? attribute(gauge, "data-ratio") : "",
        threshold: gauge ? attribute(gauge, "data-threshold") : "",
        text: gauge?.querySelector('[data-testid="timeline-gauge-text"]')?.textContent ?? "",
      },
      summary: document.querySelector('[data-testid="timeline-summary"]')?.textContent ?? "",
    };
  });
}

/** The finished chat, whichever way it reached the page. */
function expectFinishedChat(shape: TimelineShape): void {
  expect(shape.iterations.map((band) => band.iteration)).toEqual(["1", "2"]);
  expect(shape.iterations[0]!.right).toBeLessThanOrEqual(shape.iterations[1]!.left + 0.5);
  expect(
    shape.requests.map(({ iteration, status, attempts, resets }) => ({
      iteration,
      status,
      attempts,
      resets,
    })),
  ).toEqual([
    { iteration: "1", status: "completed", attempts: "2", resets: 1 },
    { iteration: "2", status: "completed", attempts: "1", resets: 0 },
  ]);
  expect(shape.requests[0]!.right).toBeLessThan(shape.requests[1]!.left);
  expect(shape.tools.map(({ id, status, lane }) => ({ id, status, lane }))).toEqual([
    { id: "call_1", status: "completed", lane: "0" },
    { id: "call_2", status: "failed", lane: "1" },
    { id: "call_3", status: "completed", lane: "0" },
  ]);
  expect(shape.tools.map((tool) => tool.colour)).toEqual([DONE_GREEN, FAILED_RED, DONE_GREEN]);
  expect(shape.tools[0]!.left).toBeLessThan(shape.tools[1]!.left);
  expect(shape.tools[1]!.left).toBeLessThan(shape.tools[2]!.left);
  // The tools run after the first request and before the second.
  expect(shape.tools[0]!.left).toBeGreaterThanOrEqual(shape.requests[0]!.right - 0.5);
  expect(shape.requests[1]!.left).toBeGreaterThan(shape.tools[2]!.left);
  expect(shape.tokens.map(({ iteration, total }) => ({ iteration, total }))).toEqual([
    { iteration: "1", total: "1050" },
    { iteration: "2", total: "1380" },
  ]);
  expect(shape.tokens[0]!.height).toBeLessThan(shape.tokens[1]!.height);
  expect(shape.waits).toEqual([{ kind: "compaction", status: "completed" }]);
  expect(shape.gauge).toEqual({
    ratio: String(40 / 4000),
    threshold: "0.7",
    text: "40 / 4,000 tokens · 1.0% · compacts at 70%",
  });
  expect(shape.summary).toContain("completed");
  expect(shape.summary).toContain(
    "2 iterations · 2 requests · 1 retry · 3 tool calls (1 failed) · 3,870 tokens",
  );
}

let browser: Browser;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
});

async function openPage(url: string, errors: string[]): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  await page.goto(url);
  await page.locator(`${byTestId("connection-status")}[data-state="live"]`).waitFor();
  return page;
}

describe("the chat timeline", () => {
  it("draws a scripted chat live: bands, request bars with the reset, tool lanes, token bars, gauge", async () => {
    const bus = new LocalBus();
    const machines = { chat: loopLikeMachine, iteration: iterationLikeMachine } as const;
    const server: UiServer = await startUiServer({
      bus,
      getMachine: (name) => machines[name as keyof typeof machines],
      machineNames: ["chat", "iteration"],
    });
    const gate1 = createGate();
    const gate2 = createGate();
    const agent = startScriptedAgent(bus, {
      prefix: PREFIX,
      agent: "bot",
      script: (text): ScriptStep[] => {
        const [first, second, third] = chatSteps(text);
        return [
          { events: first, gate: gate1.promise },
          { events: second, gate: gate2.promise },
          { events: third },
        ];
      },
    });
    const errors: string[] = [];
    const page = await openPage(server.url, errors);
    try {
      await page.fill(byTestId("composer-agent"), "bot");
      await page.fill(byTestId("composer-session"), "t1");
      await page.fill(byTestId("composer-text"), "What time is it?");
      await page.click(byTestId("send-button"));

      // Step 1: the first request streams; nothing else yet.
      await expect.poll(async () => (await timelineShape(page)).requests.length).toBe(1);
      let shape = await timelineShape(page);
      expect(shape.iterations.map((band) => band.iteration)).toEqual(["1"]);
      expect(shape.requests[0]).toMatchObject({
        iteration: "1",
        status: "running",
        attempts: "1",
        resets: 0,
      });
      expect(shape.tools).toEqual([]);
      expect(shape.tokens).toEqual([]);
      expect(shape.gauge.text).toBe("0 / 4,000 tokens · 0.0% · compacts at 70%");
      gate1.open();

      // Step 2: the retried request ended with its usage, the tools ran, the final request streams.
      await expect.poll(async () => (await timelineShape(page)).requests.length).toBe(2);
      shape = await timelineShape(page);
      expect(shape.iterations.map((band) => band.iteration)).toEqual(["1", "2"]);
      expect(shape.requests.map(({ status, attempts, resets }) => ({ status, attempts, resets }))).toEqual([
        { status: "completed", attempts: "2", resets: 1 },
        { status: "running", attempts: "1", resets: 0 },
      ]);
      expect(shape.tools.map((tool) => [tool.id, tool.status])).toEqual([
        ["call_1", "completed"],
        ["call_2", "failed"],
        ["call_3", "completed"],
      ]);
      expect(shape.tokens.map((bar) => bar.total)).toEqual(["1050"]);
      expect(shape.gauge.ratio).toBe(String(1050 / 4000));
      await page.screenshot({ path: `${ARTIFACTS}/timeline-1-live.png` });
      gate2.open();

      // Step 3: done and compacted.
      await expect
        .poll(async () => (await timelineShape(page)).waits)
        .toEqual([{ kind: "compaction", status: "completed" }]);
      await expect.poll(async () => (await timelineShape(page)).summary).toContain("completed");
      expectFinishedChat(await timelineShape(page));
      await page.screenshot({ path: `${ARTIFACTS}/timeline-2-done.png` });

      // Reloaded: the same timeline from the server's memory.
      await page.reload();
      await page.locator(`${byTestId("connection-status")}[data-state="live"]`).waitFor();
      await page.locator(`${byTestId("session-item")}[data-session="t1"]`).click();
      await expect.poll(async () => (await timelineShape(page)).summary).toContain("completed");
      expectFinishedChat(await timelineShape(page));

      // A second chat: the timeline follows it; the picker brings the first one back.
      const timeline = page.locator(byTestId("timeline"));
      expect(await timeline.getAttribute("data-chat-id")).toBe("chat-1");
      await page.fill(byTestId("composer-text"), "And now?");
      await page.click(byTestId("send-button"));
      await expect.poll(() => timeline.getAttribute("data-chat-id")).toBe("chat-2");
      await expect.poll(async () => (await timelineShape(page)).summary).toContain("completed");
      expect(await page.locator(`${byTestId("timeline-chat")} option`).allTextContents()).toEqual([
        "latest chat (follows live)",
        "1. What time is it?",
        "2. And now?",
      ]);
      await page.selectOption(byTestId("timeline-chat"), "chat-1");
      await expect.poll(() => timeline.getAttribute("data-chat-id")).toBe("chat-1");
      expectFinishedChat(await timelineShape(page));
      expect(errors).toEqual([]);
    } finally {
      gate1.open();
      gate2.open();
      await page.context().close();
      agent.stop();
      await server.close();
      await bus.close();
    }
  });

  it("draws the same chat replayed from the JetStream log", async () => {
    const nats = await workerNatsServer();
    const bus = await NatsBus.connect({ url: nats.url, name: "timeline-test" });
    const prefix = `tltest${Date.now().toString(36)}`;
    let server: UiServer | undefined;
    let page: Page | undefined;
    try {
      await ensureEventStream(bus.connection, { prefix });
      const make = createEventFactory("bot", "replayed", "chat-7");
      const events = chatSteps("What time is it?")
        .flat()
        .map((step) => make(step.body, step.iteration));
      publishEvents(bus, prefix, events);
      await bus.flush();
      const manager = await jetstreamManager(bus.connection);
      await expect
        .poll(async () => (await manager.streams.info(eventStreamName(prefix))).state.messages)
        .toBe(events.length);

      // The UI starts after the chat: only the log has it. One live session-level event lists the session.
      server = await startUiServer({ bus, prefix, natsConnection: bus.connection });
      const errors: string[] = [];
      page = await openPage(server.url, errors);
      const sessionLevel = createEventFactory("bot", "replayed", "");
      publishEvents(bus, prefix, [sessionLevel({ kind: "StateChanged", machine: "session", state: "idle" })]);
      const item = page.locator(`${byTestId("session-item")}[data-session="replayed"]`);
      await item.click();
      await page.locator(`${byTestId("transcript")}[data-loaded="true"]`).waitFor();
      await expect.poll(async () => (await timelineShape(page!)).summary).toContain("completed");
      expectFinishedChat(await timelineShape(page));
      expect(await page.locator(byTestId("timeline")).getAttribute("data-chat-id")).toBe("chat-7");
      expect(errors).toEqual([]);
      await manager.streams.delete(eventStreamName(prefix));
    } finally {
      await page?.context().close();
      await server?.close();
      await bus.close();
      await nats.stop();
    }
  });
});

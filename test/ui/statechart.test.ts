import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatMachine } from "../../machines/chat.machine.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { EventBody } from "../../src/events/types.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { allStates, machineGraph } from "../../src/viz/machine-graph.js";
import { createGate, type ScriptedAgent, type ScriptStep, startScriptedAgent } from "./scripted-agent.js";
import { launchChromium } from "./support/launch-chromium.js";

/**
 * The project's own chat statechart (laid out by ELK) in the UI at its default size, 1440×900:
 * every state name readable without "full size" (rendered at ≥ 10 px, inside its box), the drawing
 * fitted to the pane, and the active state and the transition just taken highlighted as a
 * scripted chat moves through the real machine's states.
 */

const ARTIFACTS = "test-artifacts";
const PREFIX = "agentloop";
const MIN_FONT_PX = 10;
const usage = { prompt: 30, completion: 12, total: 42, cached: 8 };
const gate = createGate();

function chatScript(): ScriptStep[] {
  const chat = (state: unknown) => ({ body: { kind: "StateChanged", machine: "chat", state } as EventBody });
  const iteration = (state: unknown) => ({
    body: { kind: "StateChanged", machine: "iteration", state } as EventBody,
    iteration: 1,
  });
  return [
    {
      events: [
        chat("preparing"),
        { body: { kind: "ChatStarted", text: "hello" } as EventBody },
        chat({ iterating: "deciding" }),
        chat({ iterating: "toolTurn" }),
        iteration("streaming"),
        { body: { kind: "ModelTextDelta", delta: "Hi there." } as EventBody, iteration: 1 },
      ],
      gate: gate.promise,
    },
    {
      events: [
        iteration("assembling"),
        iteration("answered"),
        chat("measuring"),
        chat("decidingCompaction"),
        chat("appending"),
        chat("done"),
        { body: { kind: "ChatCompleted", result: "Hi there.", usage, tokenUsed: 42 } as EventBody },
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
  // The project's machines: the chart under test is the real chat machine's.
  server = await startUiServer({ bus });
  agent = startScriptedAgent(bus, { prefix: PREFIX, agent: "bot", script: chatScript });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
});

afterAll(async () => {
  gate.open();
  await browser?.close();
  agent?.stop();
  await server?.close();
  await bus?.close();
});

const byTestId = (id: string) => `[data-testid="${id}"]`;
const chart = `${byTestId("chart-chat")}`;

interface TitleMetrics {
  id: string;
  text: string;
  /** Computed font size × the drawing's scale on screen. */
  renderedFontPx: number;
  title: { left: number; top: number; right: number; bottom: number };
  box: { left: number; top: number; right: number; bottom: number };
}

async function titleMetrics(): Promise<TitleMetrics[]> {
  return page.locator(`${chart} .al-state`).evaluateAll((groups) =>
    groups.map((group) => {
      const title = group.querySelector(".al-title") as SVGTextElement;
      const box = group.querySelector(".al-box") as SVGRectElement;
      const matrix = title.getScreenCTM()!;
      const toRect = (rect: DOMRect) => ({
        left: rect.left,
        top: rect.top,
        right: rect.right,
        bottom: rect.bottom,
      });
      return {
        id: group.getAttribute("data-state-id")!,
        text: title.textContent ?? "",
        renderedFontPx: Number.parseFloat(getComputedStyle(title).fontSize) * Math.hypot(matrix.a, matrix.b),
        title: toRect(title.getBoundingClientRect()),
        box: toRect(box.getBoundingClientRect()),
      };
    }),
  );
}

async function classesOf(stateId: string): Promise<string[]> {
  const value = await page.locator(`${chart} [data-state-id="${stateId}"]`).getAttribute("class");
  return (value ?? "").split(/\s+/);
}

/** `source -> target` of every edge marked as the transition just taken. */
async function takenEdges(): Promise<string[]> {
  return page
    .locator(`${chart} .al-edge.taken`)
    .evaluateAll((edges) =>
      edges.map((edge) => `${edge.getAttribute("data-source")} -> ${edge.getAttribute("data-target")}`),
    );
}

describe("the chat statechart at 1440×900", () => {
  it("shows every state name at ≥ 10 px, inside its box, and fits the drawing to the pane", async () => {
    await page.goto(server.url);
    await page.locator(`${chart}[data-loaded="true"]`).waitFor();

    const expected = allStates(machineGraph(chatMachine, { name: "chat" }));
    const metrics = await titleMetrics();
    expect(metrics.map((metric) => metric.id).sort()).toEqual(expected.map((state) => state.id).sort());
    const host = await page.locator(byTestId("statechart")).evaluate((element) => {
      const rect = element.getBoundingClientRect();
      const style = getComputedStyle(element);
      return {
        left: rect.left + Number.parseFloat(style.paddingLeft),
        right: rect.right - Number.parseFloat(style.paddingRight),
        top: rect.top + Number.parseFloat(style.paddingTop),
        bottom: rect.bottom - Number.parseFloat(style.paddingBottom),
      };
    });
    for (const metric of metrics) {
      expect(metric.text, metric.id).toBe(expected.find((state) => state.id === metric.id)!.key);
      expect(metric.renderedFontPx, `${metric.id} font`).toBeGreaterThanOrEqual(MIN_FONT_PX);
      // On screen, within the pane, and inside its own box (the text-width estimate holds).
      expect(metric.title.left, `${metric.id} left`).toBeGreaterThanOrEqual(metric.box.left);
      expect(metric.title.right, `${metric.id} right`).toBeLessThanOrEqual(metric.box.right);
      expect(metric.title.top, `${metric.id} top`).toBeGreaterThanOrEqual(metric.box.top);
      expect(metric.title.bottom, `${metric.id} bottom`).toBeLessThanOrEqual(metric.box.bottom);
      expect(metric.box.left).toBeGreaterThanOrEqual(host.left - 0.5);
      expect(metric.box.right).toBeLessThanOrEqual(host.right + 0.5);
      expect(metric.box.top).toBeGreaterThanOrEqual(host.top - 0.5);
      expect(metric.box.bottom).toBeLessThanOrEqual(host.bottom + 0.5);
    }

    // Fitted: the machine's box spans (nearly) the pane's full width or full height.
    const root = metrics.find((metric) => metric.id === "chat")!.box;
    const widthUsed = (root.right - root.left) / (host.right - host.left);
    const heightUsed = (root.bottom - root.top) / (host.bottom - host.top);
    expect(Math.max(widthUsed, heightUsed)).toBeGreaterThanOrEqual(0.9);
    // No scrolling needed to see it all.
    const scroll = await page
      .locator(byTestId("statechart"))
      .evaluate((element) => element.scrollHeight - element.clientHeight);
    expect(scroll).toBeLessThanOrEqual(1);
    await page.screenshot({ path: `${ARTIFACTS}/statechart-fit.png` });
  });

  it("highlights the active state and the transition just taken while a chat runs", async () => {
    await page.fill(byTestId("composer-agent"), "bot");
    await page.fill(byTestId("composer-session"), "s1");
    await page.fill(byTestId("composer-text"), "hello");
    await page.click(byTestId("send-button"));

    await expect.poll(() => classesOf("chat.iterating.toolTurn")).toContain("active-leaf");
    expect(await classesOf("chat.iterating")).toContain("active");
    expect(await classesOf("chat.preparing")).not.toContain("active");
    await expect.poll(takenEdges).toEqual(["chat.iterating.deciding -> chat.iterating.toolTurn"]);
    await page.screenshot({ path: `${ARTIFACTS}/statechart-tool-turn.png` });
    gate.open();

    await expect.poll(() => classesOf("chat.done")).toContain("active-leaf");
    expect(await classesOf("chat.iterating")).not.toContain("active");
    await expect.poll(takenEdges).toEqual(["chat.appending -> chat.done"]);
    // Drawn in the accent colour (after a short CSS transition), so it stands out.
    const taken = page.locator(`${chart} .al-edge.taken > .al-edge-line`);
    await expect.poll(() => taken.evaluate((line) => getComputedStyle(line).stroke)).toBe("rgb(37, 99, 235)");
    await page.screenshot({ path: `${ARTIFACTS}/statechart-done.png` });
  });

  it("shows the drawing at its own size on 'full size', and fits it again after", async () => {
    const svg = page.locator(`${chart} svg`);
    const natural = Number(await svg.getAttribute("width"));
    await page.click(byTestId("chart-zoom"));
    await expect.poll(async () => (await svg.boundingBox())?.width).toBeCloseTo(natural, 0);
    await page.click(byTestId("chart-zoom"));
    const host = await page.locator(byTestId("statechart")).boundingBox();
    await expect.poll(async () => (await svg.boundingBox())?.width).toBeCloseTo(host!.width - 20, 0);
    expect(pageErrors).toEqual([]);
  });
});

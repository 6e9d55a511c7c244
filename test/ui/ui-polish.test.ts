import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { EventBody } from "../../src/events/types.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { createGate, type ScriptedAgent, type ScriptStep, startScriptedAgent } from "./scripted-agent.js";
import { launchChromium } from "./support/launch-chromium.js";

/**
 * The page at 1440×900 as a newcomer meets it: the transcript follows a long live answer to its last
 * line (and stays where the reader scrolled to), the timeline's axis labels never overlap, the
 * statecharts sit at the top of their pane with no label too small to read, the status line under
 * the message box belongs to the selected session, and sessions holding a call for approval are
 * marked and can be filtered.
 */

const PREFIX = "agentloop";
const usage = { prompt: 30, completion: 12, total: 42, cached: 0 };
const byTestId = (id: string) => `[data-testid="${id}"]`;
const firstBurst = createGate();
const secondBurst = createGate();

const line = (index: number) =>
  `Line ${index} of a long answer that wraps the transcript well past its height.\n`;
const deltas = (from: number, to: number): ScriptStep["events"] =>
  Array.from({ length: to - from }, (_, index) => ({
    body: { kind: "ModelTextDelta", delta: line(from + index) } as EventBody,
    iteration: 1,
  }));

function script(text: string): ScriptStep[] {
  const started = { body: { kind: "ChatStarted", text } as EventBody };
  const completed = (result: string) => ({
    body: { kind: "ChatCompleted", result, usage, tokenUsed: 42 } as EventBody,
  });
  if (text === "long") {
    return [
      {
        events: [
          started,
          { body: { kind: "ModelRequest", final: false, messageCount: 2 } as EventBody, iteration: 1 },
          { body: { kind: "ModelStreamSegmentStart", attempt: 1 } as EventBody, iteration: 1 },
          ...deltas(0, 120),
        ],
        gate: firstBurst.promise,
      },
      { events: deltas(120, 160), gate: secondBurst.promise },
      { events: [...deltas(160, 200), completed("done")] },
    ];
  }
  if (text === "needs approval") {
    return [
      {
        events: [
          started,
          {
            body: {
              kind: "ToolApprovalRequested",
              toolName: "shell",
              toolCallId: "call_9",
              arguments: '{"command":"ls"}',
            } as EventBody,
            iteration: 1,
          },
        ],
        gate: new Promise<void>(() => {}),
      },
    ];
  }
  return [{ events: [started, completed(`echo: ${text}`)] }];
}

let bus: LocalBus;
let server: UiServer;
let browser: Browser;
let page: Page;
let agent: ScriptedAgent;
const pageErrors: string[] = [];

beforeAll(async () => {
  bus = new LocalBus();
  server = await startUiServer({ bus });
  agent = startScriptedAgent(bus, { prefix: PREFIX, agent: "bot", script });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
  await page.goto(server.url);
  await page.locator(`${byTestId("connection-status")}[data-state="live"]`).waitFor();
}, 60_000);

afterAll(async () => {
  firstBurst.open();
  secondBurst.open();
  await browser?.close();
  agent?.stop();
  await server?.close();
  await bus?.close();
});

async function send(session: string, text: string): Promise<void> {
  await page.fill(byTestId("composer-agent"), "bot");
  await page.fill(byTestId("composer-session"), session);
  await page.fill(byTestId("composer-text"), text);
  await page.click(byTestId("send-button"));
}

/** How far the transcript's end is below what it shows, in px (0: the last line is in view). */
function distanceToEnd(): Promise<number> {
  return page
    .locator(byTestId("transcript"))
    .evaluate((root) => root.scrollHeight - root.scrollTop - root.clientHeight);
}

describe("the page at 1440×900", () => {
  it(
    "follows a long live answer to its last line, and stays where the reader scrolled up to",
    { timeout: 60_000 },
    async () => {
      await send("long", "long");
      await expect.poll(async () => page.locator(byTestId("transcript")).innerText()).toContain("Line 119 ");
      await expect.poll(distanceToEnd).toBeLessThan(2);
      firstBurst.open();
      await expect.poll(async () => page.locator(byTestId("transcript")).innerText()).toContain("Line 159 ");
      await expect.poll(distanceToEnd).toBeLessThan(2);
      // The reader scrolls up: new text must not pull the view away from what they read.
      await page.locator(byTestId("transcript")).evaluate((root) => {
        root.scrollTop = 0;
      });
      await expect
        .poll(() => page.locator(byTestId("transcript")).evaluate((root) => root.scrollTop))
        .toBe(0);
      secondBurst.open();
      await expect.poll(async () => page.locator(byTestId("transcript")).innerText()).toContain("Line 199 ");
      expect(await page.locator(byTestId("transcript")).evaluate((root) => root.scrollTop)).toBe(0);
    },
  );

  it("labels the timeline's axis without overlaps", async () => {
    const boxes = await page
      .locator(`${byTestId("timeline")} ${byTestId("timeline-tick")}`)
      .evaluateAll((ticks) =>
        ticks.map((tick) => {
          const rect = tick.getBoundingClientRect();
          return { text: tick.textContent, left: rect.left, right: rect.right };
        }),
      );
    expect(boxes.length).toBeGreaterThanOrEqual(2);
    const sorted = [...boxes].sort((a, b) => a.left - b.left);
    for (let index = 1; index < sorted.length; index++) {
      expect(
        sorted[index]!.left,
        `${sorted[index - 1]!.text} / ${sorted[index]!.text}`,
      ).toBeGreaterThanOrEqual(sorted[index - 1]!.right);
    }
  });

  it("draws each statechart at the top of its pane, with every edge label readable or hidden until hover", async () => {
    for (const machine of ["chat", "iteration", "session", "compaction"]) {
      await page.click(byTestId(`statechart-tab-${machine}`));
      const pane = byTestId(`chart-${machine}`);
      await page.locator(`${pane}[data-loaded="true"]`).waitFor();
      const metrics = await page.locator(pane).evaluate((element) => {
        const svg = element.querySelector("svg")!;
        const host = element.parentElement!.getBoundingClientRect();
        // Where the drawing begins: its highest box or text.
        const top = Math.min(
          ...Array.from(svg.querySelectorAll(".al-box, text")).map(
            (node) => node.getBoundingClientRect().top,
          ),
        );
        const labels = Array.from(svg.querySelectorAll(".al-edge > .al-label")).map((label) => {
          const matrix = (label as SVGTextElement).getScreenCTM()!;
          return {
            visible: getComputedStyle(label).visibility !== "hidden",
            renderedPx: Number.parseFloat(getComputedStyle(label).fontSize) * Math.hypot(matrix.a, matrix.b),
          };
        });
        return { gapAbove: top - host.top, labels };
      });
      expect(metrics.gapAbove, `${machine}: empty space above the chart`).toBeLessThanOrEqual(24);
      for (const label of metrics.labels) {
        if (label.visible) expect(label.renderedPx, `${machine}: edge label size`).toBeGreaterThanOrEqual(10);
      }
    }
  });

  it("keeps each session's status line with its session, and marks and filters sessions awaiting approval", async () => {
    await send("quiet", "hello");
    await expect
      .poll(() => page.locator(byTestId("control-status")).textContent())
      .toContain("reply from bot / quiet");
    await send("held", "needs approval");
    const held = page.locator(`${byTestId("session-item")}[data-session="held"]`);
    await expect
      .poll(() => held.locator(byTestId("session-waiting")).textContent())
      .toBe("awaiting approval");
    // The held chat's status is its own: selecting "quiet" shows quiet's, not "waiting for the reply".
    expect(await page.locator(byTestId("control-status")).textContent()).toContain("sent to bot / held");
    await page.click(`${byTestId("session-item")}[data-session="quiet"]`);
    expect(await page.locator(byTestId("control-status")).textContent()).toContain("reply from bot / quiet");
    await page.click(`${byTestId("session-item")}[data-session="long"]`);
    expect(await page.locator(byTestId("control-status")).textContent()).toContain("reply from bot / long");

    await page.check(byTestId("waiting-filter"));
    const shown = await page
      .locator(byTestId("session-item"))
      .evaluateAll((items) =>
        items
          .filter((item) => !(item as HTMLElement).hidden)
          .map((item) => item.getAttribute("data-session")),
      );
    expect(shown).toEqual(["held"]);
    await page.uncheck(byTestId("waiting-filter"));
    expect(await page.locator(`${byTestId("session-item")}:visible`).count()).toBe(3);
    expect(pageErrors).toEqual([]);
    // `npm run screenshot` keeps the README's picture of the page current: a session holding a call.
    const screenshot = process.env.AGENTLOOP_README_SCREENSHOT;
    if (screenshot !== undefined && screenshot !== "") {
      await page.click(`${byTestId("session-item")}[data-session="held"]`);
      await page.click(byTestId("statechart-tab-chat"));
      await page.locator(`${byTestId("tool-call")}[data-status="awaiting-approval"]`).waitFor();
      await page.screenshot({ path: screenshot });
    }
  });
});

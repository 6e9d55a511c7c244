import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { LocalBus } from "../../src/bus/local-bus.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { iterationLikeMachine, loopLikeMachine } from "../viz/test-machines.js";
import { createGate } from "./scripted-agent.js";
import { launchChromium } from "./support/launch-chromium.js";

/**
 * An agent tree in the page: a host on a LocalBus serves `lead` (scripted: it asks `keeper` with
 * `ask_agent`) and `keeper` (scripted: it says what it does, then calls a tool of its own); the UI
 * server watches the same bus. Under lead's `ask_agent` call the transcript shows keeper's lane —
 * its text and its tool step as they come, open while it runs, folded once it ended, the same after
 * a reload — and a call keeper holds for approval is decided from lead's view.
 */

const ARTIFACTS = "test-artifacts";
const PREFIX = "agentloop";
const byTestId = (id: string) => `[data-testid="${id}"]`;

const vaultGate = createGate();

const openVault = defineTool({
  name: "open_vault",
  description: "Opens a vault door.",
  parameters: z.object({ door: z.number() }),
  // Held open until the test has looked at the page mid-call.
  execute: async ({ door }) => {
    await vaultGate.promise;
    return `door ${door} open`;
  },
});

const openSafe = defineTool({
  name: "open_safe",
  description: "Opens the safe.",
  parameters: z.object({ code: z.string() }),
  needsApproval: true,
  execute: ({ code }) => `safe open with ${code}`,
});

/** The tool result the model got last, if the last message is one. */
function lastResult(request: ScriptedRequest): string | undefined {
  const last = request.messages.at(-1);
  return last?.role === "tool" ? textOf(last.content as string) : undefined;
}

function firstUserText(request: ScriptedRequest): string {
  const first = request.messages.find((message) => message.role === "user");
  return first === undefined ? "" : textOf(first.content as string);
}

const lead = new ScriptedBackend((request): ScriptedStep => {
  const result = lastResult(request);
  if (result !== undefined) return { text: `keeper says: ${result}` };
  const asked = firstUserText(request);
  const task = asked.includes("safe")
    ? "open the safe"
    : asked.includes("smith")
      ? "ask smith"
      : "open door 7";
  return { toolCalls: [{ name: "ask_agent", arguments: { agent: "keeper", message: task } }] };
});

const keeper = new ScriptedBackend((request): ScriptedStep => {
  const result = lastResult(request);
  if (result !== undefined) return { text: result };
  if (firstUserText(request).includes("smith")) {
    return { toolCalls: [{ name: "ask_agent", arguments: { agent: "smith", message: "forge a key" } }] };
  }
  if (firstUserText(request).includes("safe")) {
    return { text: "Opening the safe.", toolCalls: [{ name: "open_safe", arguments: { code: "1234" } }] };
  }
  return {
    deltas: ["Checking ", "the vault."],
    text: "Checking the vault.",
    toolCalls: [{ name: "open_vault", arguments: { door: 7 } }],
  };
});

const smith = new ScriptedBackend((request): ScriptedStep => {
  const result = lastResult(request);
  if (result !== undefined) return { text: `forged: ${result}` };
  return { text: "Heating the forge.", toolCalls: [{ name: "current_time" }] };
});

let bus: LocalBus;
let host: RunningHost;
let server: UiServer;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  bus = new LocalBus();
  host = await startHost({
    bus,
    prefix: PREFIX,
    agents: [
      { name: "lead", tools: ["ask_agent"], backend: lead },
      { name: "keeper", tools: [openVault, openSafe, "ask_agent"], backend: keeper },
      { name: "smith", tools: ["current_time"], backend: smith },
    ],
  });
  const machines = { chat: loopLikeMachine, iteration: iterationLikeMachine } as const;
  server = await startUiServer({
    bus,
    prefix: PREFIX,
    getMachine: (name) => machines[name as keyof typeof machines],
    machineNames: ["chat", "iteration"],
  });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
}, 60_000);

afterAll(async () => {
  vaultGate.open();
  await browser?.close();
  await server?.close();
  await host?.close();
  await bus?.close();
});

async function send(session: string, text: string): Promise<void> {
  await page.fill(byTestId("composer-agent"), "lead");
  await page.fill(byTestId("composer-session"), session);
  await page.fill(byTestId("composer-text"), text);
  await page.click(byTestId("send-button"));
}

/** keeper's lane under lead's ask_agent call in the shown transcript. */
function keeperLane(session: string) {
  return page.locator(
    `${byTestId("tool-call")}[data-status] ${byTestId("child-lane")}[data-agent="keeper"][data-session="lead-${session}"]`,
  );
}

const isOpen = (lane: ReturnType<typeof keeperLane>) =>
  lane.evaluate((node) => (node as HTMLDetailsElement).open);

describe("a sub-agent's work in the transcript", () => {
  it(
    "shows the asked agent's text and tool step under the ask_agent call, live and after a reload",
    { timeout: 90_000 },
    async () => {
      await page.goto(server.url);
      await page.locator(`${byTestId("connection-status")}[data-state="live"]`).waitFor();
      await send("s1", "open the vault");

      // Live, mid-call: keeper's lane is open under lead's ask_agent call, its tool still running.
      const lane = keeperLane("s1");
      await lane.waitFor({ timeout: 30_000 });
      const askCall = page.locator(byTestId("tool-call"), {
        has: page.locator(`${byTestId("child-lane")}[data-session="lead-s1"]`),
      });
      expect(await askCall.locator(".tool-name").first().textContent()).toBe("ask_agent");
      expect(await lane.locator(byTestId("child-lane-name")).textContent()).toBe("keeper / lead-s1");
      await expect
        .poll(() => lane.locator(byTestId("child-text")).allTextContents())
        .toEqual(["Checking the vault."]);
      const step = lane.locator(`${byTestId("child-step")}[data-tool-name="open_vault"]`);
      await expect.poll(() => step.getAttribute("data-status")).toBe("running");
      expect(await lane.getAttribute("data-status")).toBe("running");
      expect(await isOpen(lane)).toBe(true);
      expect(await lane.locator(byTestId("child-text")).isVisible()).toBe(true);
      // The timeline draws keeper's span as a lane of its own under the tools, its tool step inside.
      const span = page.locator(`${byTestId("timeline-child")}[data-agent="keeper"][data-session="lead-s1"]`);
      await expect.poll(() => span.getAttribute("data-status")).toBe("running");
      expect(
        await span.locator(`${byTestId("timeline-child-step")}[data-tool-name="open_vault"]`).count(),
      ).toBe(1);
      await page.screenshot({ path: `${ARTIFACTS}/ui-child-lane-live.png` });
      vaultGate.open();

      // Done: the step and the lane ended; the lane folds to its head; lead answered.
      await expect.poll(() => step.getAttribute("data-status")).toBe("completed");
      await expect.poll(() => lane.getAttribute("data-status")).toBe("completed");
      await expect
        .poll(() => page.locator(byTestId("control-status")).textContent())
        .toContain("reply from lead / s1");
      expect(await isOpen(lane)).toBe(false);
      expect(await lane.locator(byTestId("child-lane-status")).textContent()).toBe("done");
      expect(await lane.locator(byTestId("child-text")).allTextContents()).toEqual([
        "Checking the vault.",
        "door 7 open",
      ]);
      expect(await askCall.locator(byTestId("tool-result")).textContent()).toBe("door 7 open");
      await expect.poll(() => span.getAttribute("data-status")).toBe("completed");

      // After a reload the session is rebuilt from the server: the same lane, folded, opens on a click.
      await page.reload();
      await page.locator(`${byTestId("connection-status")}[data-state="live"]`).waitFor();
      await page.locator(`${byTestId("session-item")}[data-agent="lead"][data-session="s1"]`).click();
      await page.locator(`${byTestId("transcript")}[data-loaded="true"]`).waitFor();
      const replayed = keeperLane("s1");
      await replayed.waitFor();
      expect(await replayed.count()).toBe(1);
      expect(await replayed.getAttribute("data-status")).toBe("completed");
      expect(await isOpen(replayed)).toBe(false);
      expect(await replayed.locator(byTestId("child-text")).first().isVisible()).toBe(false);
      await replayed.locator(byTestId("child-lane-head")).click();
      expect(await isOpen(replayed)).toBe(true);
      // Its text before the tool step, then its answer after it.
      expect(await replayed.locator(byTestId("child-text")).allTextContents()).toEqual([
        "Checking the vault.",
        "door 7 open",
      ]);
      expect(await replayed.locator(byTestId("child-text")).first().isVisible()).toBe(true);
      const replayedStep = replayed.locator(`${byTestId("child-step")}[data-tool-name="open_vault"]`);
      expect(await replayedStep.getAttribute("data-status")).toBe("completed");
      expect(await replayedStep.locator(byTestId("child-step-status")).textContent()).toBe("done");
      const replayedSpan = page.locator(`${byTestId("timeline-child")}[data-agent="keeper"]`);
      expect(await replayedSpan.getAttribute("data-status")).toBe("completed");
      expect(
        await replayedSpan
          .locator(`${byTestId("timeline-child-step")}[data-tool-name="open_vault"]`)
          .getAttribute("data-status"),
      ).toBe("completed");
      await page.screenshot({ path: `${ARTIFACTS}/ui-child-lane-replayed.png` });
      // A second click folds it again: the reader decides.
      await replayed.locator(byTestId("child-lane-head")).click();
      expect(await isOpen(replayed)).toBe(false);

      // The lane's button opens keeper's own session, with every event of it.
      await replayed.locator(byTestId("open-child-session")).click();
      await expect
        .poll(() => page.locator(byTestId("selected-session")).textContent())
        .toBe("keeper / lead-s1");
      await expect.poll(() => page.locator(byTestId("user-message")).textContent()).toBe("open door 7");
      expect(
        await page.locator(`${byTestId("tool-call")}[data-status="completed"] .tool-name`).allTextContents(),
      ).toEqual(["open_vault"]);
      // keeper's chat says who asked it, and leads back there.
      const askedBy = page.locator(byTestId("asked-by"));
      expect(await askedBy.textContent()).toMatch(/^asked by lead \/ s1 \(its call \S+\) open session$/);
      await askedBy.locator(byTestId("open-parent-session")).click();
      await expect.poll(() => page.locator(byTestId("selected-session")).textContent()).toBe("lead / s1");
      await keeperLane("s1").waitFor();
    },
  );

  it(
    "shows a call held by the asked agent on the root, names it, and decides it from there",
    {
      timeout: 90_000,
    },
    async () => {
      await send("s2", "open the safe");
      const lane = keeperLane("s2");
      await lane.waitFor({ timeout: 30_000 });
      const step = lane.locator(`${byTestId("child-step")}[data-tool-name="open_safe"]`);
      await expect.poll(() => step.getAttribute("data-status")).toBe("awaiting-approval");
      expect(await isOpen(lane)).toBe(true);
      expect(await step.locator(byTestId("approval-holder")).textContent()).toBe(
        "open_safe held by keeper / lead-s2",
      );
      expect(await step.locator(byTestId("tool-args")).textContent()).toContain('"code": "1234"');
      // In the order keeper did it: its text, then the held call (whose root copy came first).
      await expect
        .poll(() =>
          lane
            .locator(`${byTestId("child-lane-body")} > *`)
            .evaluateAll((nodes) => nodes.map((node) => node.getAttribute("data-testid"))),
        )
        .toEqual(["child-text", "child-step"]);
      expect(await lane.locator(byTestId("child-text")).textContent()).toBe("Opening the safe.");
      // Shown once, in the lane: not a second time as a call of lead's own.
      expect(await page.locator(byTestId("approve-tool")).count()).toBe(1);
      await expect
        .poll(() =>
          page
            .locator(`${byTestId("session-item")}[data-session="s2"] ${byTestId("session-waiting")}`)
            .textContent(),
        )
        .toBe("awaiting approval");
      await page.screenshot({ path: `${ARTIFACTS}/ui-child-lane-approval.png` });

      await step.locator(byTestId("approve-tool")).click();
      await expect.poll(() => step.getAttribute("data-status")).toBe("completed");
      expect(await step.locator(byTestId("tool-approval")).count()).toBe(0);
      // (The status line shows whichever came last, the decision's answer or the chat's reply.)
      await expect
        .poll(() => page.locator(byTestId("assistant-text")).last().textContent())
        .toBe("keeper says: safe open with 1234");
    },
  );

  it(
    "nests a chat the asked agent asked in turn under that agent's own ask_agent step",
    {
      timeout: 90_000,
    },
    async () => {
      await send("s3", "ask smith for a key");
      await expect
        .poll(() => page.locator(byTestId("control-status")).textContent(), { timeout: 30_000 })
        .toContain("reply from lead / s3");
      const lane = keeperLane("s3");
      await lane.locator(byTestId("child-lane-head")).first().click();
      const askStep = lane.locator(`${byTestId("child-step")}[data-tool-name="ask_agent"]`);
      expect(await askStep.getAttribute("data-status")).toBe("completed");
      const nested = askStep.locator(`${byTestId("child-lane")}[data-agent="smith"]`);
      expect(await nested.getAttribute("data-session")).toBe("keeper-lead-s3");
      expect(await nested.getAttribute("data-depth")).toBe("2");
      expect(await nested.getAttribute("data-status")).toBe("completed");
      await nested.locator(byTestId("child-lane-head")).first().click();
      expect(await nested.locator(byTestId("child-text")).allTextContents()).toEqual([
        "Heating the forge.",
        expect.stringMatching(/^forged: /),
      ]);
      expect(
        await nested
          .locator(`${byTestId("child-step")}[data-tool-name="current_time"]`)
          .getAttribute("data-status"),
      ).toBe("completed");
      // One lane each: smith's is not also shown beside keeper's.
      expect(await page.locator(byTestId("child-lane")).count()).toBe(2);
      // The timeline nests it too.
      expect(
        await page.locator(`${byTestId("timeline-child")}[data-agent="smith"]`).getAttribute("data-depth"),
      ).toBe("2");
      await page.screenshot({ path: `${ARTIFACTS}/ui-child-lane-nested.png` });
      expect(pageErrors).toEqual([]);
    },
  );
});

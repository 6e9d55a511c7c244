import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type FakeProvider, startFakeProvider, textTurn, toolResults } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { launchChromium } from "./support/launch-chromium.js";
import { type RunningUp, startUp } from "./support/running-up.js";

/**
 * In the page: `agentloop up` (the built binary) on a real nats-server, with an agent whose
 * `current_time` calls need approval. The held call shows Approve / Deny; the page's buttons send
 * the decision through the UI server's control route, and the chat goes on.
 */

const LONG = { timeout: 45_000 };
const byTestId = (id: string) => `[data-testid="${id}"]`;

let browser: Browser;
let nats: NatsServer;
let model: FakeProvider;
let up: RunningUp;
let page: Page;
let directory: string;
const pageErrors: string[] = [];

const timeCall = turn({ toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }] });

beforeAll(async () => {
  browser = await launchChromium();
  nats = await workerNatsServer();
  directory = await mkdtemp(join(tmpdir(), "agentloop-ui-approval-"));
  const agents = join(directory, "agents.json");
  await writeFile(
    agents,
    JSON.stringify({
      agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"] }],
    }),
  );
  model = await startFakeProvider("openai-chat", [
    timeCall,
    textTurn("It is noon."),
    timeCall,
    textTurn("I may not look at the clock."),
  ]);
  up = await startUp(
    ["--port", "0", "--nats", nats.url, "--prefix", uniqueRoot(), "--agents", agents, ...model.flags],
    { env: model.env },
  );
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
  await page.goto(up.url);
  await page.locator(`${byTestId("connection-status")}[data-state="live"]`).waitFor();
}, 120_000);

afterAll(async () => {
  await page?.context().close();
  await browser?.close();
  await up?.stop();
  await model?.close();
  await nats?.stop();
  await rm(directory, { recursive: true, force: true });
});

async function send(session: string, text: string): Promise<void> {
  await page.fill(byTestId("composer-session"), session);
  await page.fill(byTestId("composer-text"), text);
  await page.click(byTestId("send-button"));
}

describe("tool approval in the web UI", () => {
  it("Approve runs the held call; Deny sends the reason to the model", { timeout: 120_000 }, async () => {
    await send("approvals", "what time is it?");
    const held = page.locator(`${byTestId("tool-call")}[data-status="awaiting-approval"]`);
    await held.waitFor(LONG);
    expect(await held.locator(".tool-name").textContent()).toBe("current_time");
    expect(await held.locator(byTestId("tool-status")).textContent()).toBe("awaiting approval");
    await page.screenshot({ path: "test-artifacts/approval-1-held.png" });
    await held.locator(byTestId("approve-tool")).click();

    await expect.poll(() => page.locator(byTestId("chat-usage")).count(), LONG).toBe(1);
    const first = page.locator(byTestId("chat")).nth(0).locator(byTestId("tool-call"));
    expect(await first.getAttribute("data-status")).toBe("completed");
    expect(await first.locator(byTestId("tool-approval")).count()).toBe(0);
    expect(await first.locator(byTestId("tool-result")).textContent()).toMatch(/^\d{4}-\d{2}-\d{2}T/);

    await send("approvals", "and now?");
    await held.waitFor(LONG);
    await held.locator(byTestId("deny-tool")).click();
    await expect.poll(() => page.locator(byTestId("chat-usage")).count(), LONG).toBe(2);
    const second = page.locator(byTestId("chat")).nth(1).locator(byTestId("tool-call"));
    expect(await second.getAttribute("data-status")).toBe("denied");
    expect(await second.locator(byTestId("tool-status")).textContent()).toBe("denied: denied in the web UI");
    expect(toolResults("openai-chat", model.bodies()[3]!).at(-1)).toEqual({
      callId: "call_1",
      output: JSON.stringify({ error: "denied", reason: "denied in the web UI" }),
    });
    await page.screenshot({ path: "test-artifacts/approval-2-denied.png" });
    expect(pageErrors).toEqual([]);
  });
});

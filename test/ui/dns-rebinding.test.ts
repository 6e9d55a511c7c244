import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BusMessage } from "../../src/bus/bus.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { controlSubject } from "../../src/bus/subjects.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { loopLikeMachine } from "../viz/test-machines.js";
import { launchChromium } from "./support/launch-chromium.js";

/**
 * The attacks the UI's guard is for, in a real browser. Chromium resolves `evil.example` to
 * 127.0.0.1 (`--host-resolver-rules`), as a rebinding attacker's DNS would: a page of that site
 * talks to the UI's port as its own origin. It must not approve a held tool call, read sessions,
 * or show the page in a frame of its own. The token's round trip through the page is checked too.
 */

const TOKEN = "browser-token-0123456789";
const APPROVE = { agent: "assistant", session: "victim", command: "approve", toolCallId: "call_2" };

let bus: LocalBus;
let open: UiServer;
let guarded: UiServer;
let attacker: Server;
let browser: Browser;
const controls: unknown[] = [];
const logged: string[] = [];

function portOf(url: string): number {
  return Number(new URL(url).port);
}

beforeAll(async () => {
  bus = new LocalBus();
  bus.subscribe(controlSubject("agentloop", "assistant"), (message: BusMessage) => {
    controls.push(JSON.parse(message.data));
    bus.respond(message, JSON.stringify({ ok: true }));
  });
  const common = {
    bus,
    getMachine: (name: string) => (name === "loop" ? loopLikeMachine : undefined),
    machineNames: ["loop"],
    log: (line: string) => logged.push(line),
  };
  open = await startUiServer(common);
  guarded = await startUiServer({ ...common, token: TOKEN });
  // The attacker's own page: frames the UI, which sits on another origin.
  attacker = createServer((request, response) => {
    const target = new URL(request.url ?? "/", "http://x").searchParams.get("target") ?? "";
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(`<!doctype html><title>attacker</title><iframe id="victim" src="${target}"></iframe>`);
  });
  await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
  browser = await launchChromium(undefined, { args: ["--host-resolver-rules=MAP evil.example 127.0.0.1"] });
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (attacker ? attacker.close(() => resolve()) : resolve()));
  await open?.close();
  await guarded?.close();
  await bus?.close();
});

describe("a page of another site that rebinds its name to 127.0.0.1", () => {
  it("cannot approve a held tool call or read the sessions: the UI refuses its Host", async () => {
    const page = await browser.newPage();
    try {
      const port = portOf(open.url);
      const landing = await page.goto(`http://evil.example:${port}/`);
      expect(landing?.status()).toBe(403);
      const results = await page.evaluate(async (body) => {
        const control = await fetch("/api/control", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const sessions = await fetch("/api/sessions");
        return {
          control: { status: control.status, body: await control.json() },
          sessions: sessions.status,
        };
      }, APPROVE);
      expect(results).toEqual({
        control: {
          status: 403,
          body: { ok: false, error: { code: "forbidden", message: expect.any(String) } },
        },
        sessions: 403,
      });
      expect(controls).toEqual([]);
      expect(logged.some((line) => /refused POST \/api\/control .*\(rule: host\)/.test(line))).toBe(true);
    } finally {
      await page.close();
    }
  });

  it("cannot show the UI in a frame (frame-ancestors 'none'), so its Approve buttons cannot be clickjacked", async () => {
    const page = await browser.newPage();
    const messages: string[] = [];
    page.on("console", (message) => messages.push(message.text()));
    try {
      const target = open.url;
      await page.goto(
        `http://evil.example:${(attacker.address() as AddressInfo).port}/?target=${encodeURIComponent(target)}`,
      );
      await expect.poll(() => messages.some((text) => /frame-ancestors 'none'/.test(text))).toBe(true);
      const frame = page.frames().find((candidate) => candidate !== page.mainFrame());
      expect(frame).toBeDefined();
      expect(await frame!.locator('[data-testid="send-button"]').count()).toBe(0);
      // The same page on its own loads fine: the frame was refused, not the page.
      const alone = await browser.newPage();
      try {
        await alone.goto(target);
        await expect.poll(() => alone.locator('[data-testid="send-button"]').count()).toBe(1);
      } finally {
        await alone.close();
      }
    } finally {
      await page.close();
    }
  });
});

describe("the token in the page", () => {
  it("is read from the URL once, taken out of the address bar, kept for the tab, and sent on every call", async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(message.text());
    });
    try {
      const port = portOf(guarded.url);
      await page.goto(guarded.url);
      expect(guarded.url).toContain(`?token=${TOKEN}`);
      await expect
        .poll(() => page.locator('[data-testid="connection-status"]').getAttribute("data-state"))
        .toBe("live");
      expect(page.url()).toBe(`http://127.0.0.1:${port}/`);
      await expect.poll(() => page.locator('[data-testid="bus-kind"]').textContent()).toBe("bus: local");
      await expect
        .poll(() => page.locator('[data-testid="chart-loop"]').getAttribute("data-loaded"))
        .toBe("true");
      // A reload (no token in the URL any more) still works: the tab kept it.
      await page.reload();
      await expect
        .poll(() => page.locator('[data-testid="connection-status"]').getAttribute("data-state"))
        .toBe("live");
      await page.fill('[data-testid="composer-agent"]', "assistant");
      await page.fill('[data-testid="composer-session"]', "mine");
      await page.click('[data-testid="stop-button"]');
      await expect.poll(() => controls).toEqual([{ session: "mine", command: "stop" }]);
      expect(errors).toEqual([]);
      expect(guarded.stats().refused.token).toBe(0);
    } finally {
      await page.close();
      controls.length = 0;
    }
  });

  it("missing, the page says how to get in instead of failing silently", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      await page.goto(`http://127.0.0.1:${portOf(guarded.url)}/`);
      await expect
        .poll(() => page.locator('[data-testid="connection-status"]').getAttribute("data-state"))
        .toBe("unauthorized");
      expect(await page.locator('[data-testid="connection-status"]').textContent()).toMatch(/\?token=/);
      expect(guarded.stats().refused.token).toBeGreaterThan(0);
    } finally {
      await context.close();
    }
  });
});

import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  chatTurnSse,
  cutAfterFrames,
  type FakeOpenAI,
  type FakeResponse,
  openAIError,
  type RecordedRequest,
  startFakeOpenAI,
} from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { conversationText, withoutLoadNotices } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { launchChromium } from "./support/launch-chromium.js";
import { recordPage } from "./support/page-recorder.js";
import { type RunningUp, startUp } from "./support/running-up.js";

/**
 * "See it live": the real `agentloop up` process (built binary: `npm run build`)
 * driven through its page in headless Chromium. Once with the demo model on the in-process bus
 * (no NATS server answers), once on a real nats-server with a fake OpenAI-compatible provider whose
 * first stream is cut mid-way, and whose slow stream is stopped from the page.
 */

const ARTIFACTS = "test-artifacts";
/** Streams, tool calls and retries in a loaded 2-core machine: wait generously, assert no speed. */
const LONG = { timeout: 45_000 };
/** Above vitest's default, so that a slow machine meets LONG waits rather than the test's timeout. */
const TEST_TIMEOUT = 120_000;

let browser: Browser;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
});

const byTestId = (id: string) => `[data-testid="${id}"]`;

/** A fresh page (its own context) that collects the page's errors. */
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

/** Loads the chat and iteration charts (a chart only highlights once loaded), leaving chat shown. */
async function loadCharts(page: Page): Promise<void> {
  await page.locator(`${byTestId("chart-chat")}[data-loaded="true"]`).waitFor();
  await page.click(byTestId("statechart-tab-iteration"));
  await page.locator(`${byTestId("chart-iteration")}[data-loaded="true"]`).waitFor();
  await page.click(byTestId("statechart-tab-chat"));
}

/** Types a message for `session` and sends it with the Send button or, as people do, with Enter. */
async function send(
  page: Page,
  session: string,
  text: string,
  via: "button" | "enter" = "button",
): Promise<void> {
  await page.fill(byTestId("composer-session"), session);
  await page.fill(byTestId("composer-text"), text);
  if (via === "enter") await page.press(byTestId("composer-text"), "Enter");
  else await page.click(byTestId("send-button"));
}

async function classesOf(page: Page, stateId: string): Promise<string[]> {
  const value = await page
    .locator(`[data-testid="statechart"] [data-state-id="${stateId}"]`)
    .first()
    .getAttribute("class");
  return (value ?? "").split(/\s+/);
}

/** The items of `expected` found in `values` in that order (all of them when the order holds). */
function inOrder(values: readonly string[], expected: readonly string[]): string[] {
  const found: string[] = [];
  let from = 0;
  for (const value of expected) {
    const index = values.indexOf(value, from);
    if (index < 0) break;
    found.push(value);
    from = index + 1;
  }
  return found;
}

const sessionItem = (page: Page, agent: string, session: string) =>
  page.locator(`${byTestId("session-item")}[data-agent="${agent}"][data-session="${session}"]`);

describe("agentloop up: the demo model on the in-process bus", () => {
  let up: RunningUp | undefined;
  let page: Page | undefined;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    // Nothing listens on port 1: `up` must fall back to its in-process bus.
    up = await startUp(["--port", "0"], { env: { NATS_URL: "nats://127.0.0.1:1" } });
    page = await openPage(up.url, pageErrors);
  });

  afterAll(async () => {
    await page?.context().close();
    await up?.stop();
  });

  it("says it fell back to the in-process bus, prints the UI URL and serves the page", async () => {
    expect(up!.output().stderr).toContain(
      "agentloop up: no NATS server at nats://127.0.0.1:1; using the in-process bus (same subjects, this process only; no $SRV services, so no Agent Protocol)",
    );
    expect(up!.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    await expect
      .poll(() => up!.output().stdout)
      .toMatch(/^agentloop up: bus in-process; agents: assistant \(demo model\)/m);
    await expect.poll(() => page!.locator(byTestId("bus-kind")).textContent()).toBe("bus: local");
  });

  it(
    "streams the answer, shows the tool calls with results and the statechart moving to done",
    async () => {
      const p = page!;
      await loadCharts(p);
      const recorder = await recordPage(p);
      expect(await p.locator(byTestId("composer-agent")).inputValue()).toBe("assistant");
      await send(p, "demo-1", "What time is it? Then make a plan for my afternoon.");

      const item = sessionItem(p, "assistant", "demo-1");
      await item.waitFor();
      expect(await item.getAttribute("aria-selected")).toBe("true");
      await expect
        .poll(() => p.locator(byTestId("user-message")).textContent())
        .toBe("What time is it? Then make a plan for my afternoon.");
      // The streamed answer shows up word by word, then the chat completes.
      await expect
        .poll(() => p.locator(byTestId("assistant-text")).first().textContent(), LONG)
        .toMatch(/^\[demo\] /);
      await expect.poll(() => p.locator(byTestId("chat-usage")).count(), LONG).toBe(1);
      await p.screenshot({ path: `${ARTIFACTS}/up-1-demo-done.png` });

      const texts = await p.locator(byTestId("assistant-text")).allTextContents();
      expect(texts).toHaveLength(1);
      expect(texts[0]).toMatch(/^\[demo\] The current time is \d{4}-\d{2}-\d{2}T\d{2}:\d{2}/);
      expect(texts[0]).toContain("I recorded this plan:\n1. ");
      expect(await p.locator(byTestId("reasoning")).first().textContent()).toContain(
        "I will call current_time",
      );

      const calls = p.locator(byTestId("tool-call"));
      expect(await calls.count()).toBe(2);
      expect(await calls.locator(".tool-name").allTextContents()).toEqual(["current_time", "todo_list"]);
      const timeCall = p.locator(`${byTestId("tool-call")}[data-tool-call-id="demo_call_1"]`);
      expect(await timeCall.getAttribute("data-status")).toBe("completed");
      expect(await timeCall.locator(byTestId("tool-result")).textContent()).toMatch(
        /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/,
      );
      expect(await timeCall.locator(byTestId("tool-status")).textContent()).toMatch(/^done · \d+ ms$/);
      const planCall = p.locator(`${byTestId("tool-call")}[data-tool-call-id="demo_call_2"]`);
      expect(await planCall.getAttribute("data-status")).toBe("completed");
      expect(await planCall.locator(byTestId("tool-args")).textContent()).toContain('"plan"');
      expect(await planCall.locator(byTestId("tool-result")).textContent()).toContain(
        "Plan updated (3 steps",
      );
      // The tools ran in iteration 1; the answer came in iteration 2.
      expect(
        await p
          .locator(`${byTestId("turn")}[data-iteration="1"]`)
          .locator(byTestId("tool-call"))
          .count(),
      ).toBe(2);
      expect(
        await p
          .locator(`${byTestId("turn")}[data-iteration="2"]`)
          .locator(byTestId("assistant-text"))
          .count(),
      ).toBe(1);

      // The highlighted state moved through the loop and its tool phase, and ended at done.
      await expect.poll(() => classesOf(p, "chat.done")).toContain("active-leaf");
      expect(await classesOf(p, "chat.iterating")).not.toContain("active");
      const { leaves } = await recorder.read();
      const path = [
        "chat.iterating.toolTurn",
        "iteration.streaming",
        "iteration.executingTools",
        "iteration.toolsDone",
        "iteration.streaming",
        "iteration.answered",
        "chat.done",
      ];
      expect(inOrder(leaves, path), `highlighted: ${leaves.join(" → ")}`).toEqual(path);
      expect(leaves.filter((id) => id.startsWith("chat.")).at(-1)).toBe("chat.done");
      expect(await p.locator(byTestId("selected-state")).textContent()).toBe("chat: done");

      // The session is listed, completed, and the reply reached the composer.
      await expect.poll(() => item.locator(byTestId("session-status")).textContent()).toBe("completed");
      expect(await item.locator(byTestId("session-state")).textContent()).toBe("chat: done");
      await expect
        .poll(() => p.locator(byTestId("control-status")).textContent())
        .toMatch(/^reply from assistant \/ demo-1 · \d+ tokens$/);
      // The logger in the same process printed the chat's lifecycle.
      await expect.poll(() => up!.output().stdout).toMatch(/assistant\/demo-1 #\d+ ChatCompleted/);
      expect(up!.output().stdout).toMatch(/assistant\/demo-1 #\d+ i1 ToolCallCompleted current_time/);
      expect(pageErrors).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it("stops on SIGTERM with exit code 0", async () => {
    await page?.context().close();
    page = undefined;
    const run = await up!.stop();
    expect(run.code).toBe(0);
    // Nothing on stderr but the fallback notice and what it does on the signal: no warnings, no stack traces.
    expect(withoutLoadNotices(run.stderr)).toBe(
      "agentloop up: no NATS server at nats://127.0.0.1:1; using the in-process bus (same subjects, this process only; no $SRV services, so no Agent Protocol)\n" +
        "agentloop up: stopping: closing the UI, finishing running chats (signal again to cancel them)\n",
    );
  });
});

// ---------------------------------------------------------------------------------------------

const RETRY_MARKER = "RETRY-ME";
const SLOW_MARKER = "SLOW-ME";
const CUT_TEXT = ["Half an ", "answer that ", "gets cut off"];
const RETRIED_TEXT = ["The whole ", "answer, on the ", "second attempt."];
/** ~10 s of streaming: the page has ample time to press Stop in the middle of it. */
const SLOW_WORDS = Array.from({ length: 100 }, (_, index) => `word${index + 1} `);

function paced(reply: FakeResponse, delayMs: number): FakeResponse {
  if (reply.type !== "sse") throw new Error("only a stream can be paced");
  return { ...reply, delayMs };
}

/**
 * The fake provider: the first request of the RETRY-ME chat streams some text and is cut (socket
 * destroyed), the second succeeds; the SLOW-ME chat streams slowly. Keyed on the conversation,
 * not the request count, so each test's chat gets its own script.
 */
function createProviderScript() {
  let retryAttempts = 0;
  return (request: RecordedRequest): FakeResponse => {
    const conversation = conversationText(request.body as Record<string, unknown>);
    if (conversation.includes(RETRY_MARKER)) {
      retryAttempts += 1;
      if (retryAttempts > 1) return chatTurnSse({ text: RETRIED_TEXT });
      // The role chunk and every text delta arrive (spaced, so each is its own event), then the cut.
      return cutAfterFrames(paced(chatTurnSse({ text: CUT_TEXT }), 50), 1 + CUT_TEXT.length);
    }
    if (conversation.includes(SLOW_MARKER)) return paced(chatTurnSse({ text: SLOW_WORDS }), 100);
    return openAIError(400, "fake: no reply scripted for this conversation");
  };
}

describe("agentloop up: NATS and a provider stream that is cut, then one that is stopped", () => {
  let nats: NatsServer | undefined;
  let fake: FakeOpenAI | undefined;
  let up: RunningUp | undefined;
  let page: Page | undefined;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    nats = await workerNatsServer();
    fake = await startFakeOpenAI({ chat: createProviderScript() });
    up = await startUp(
      [
        "--port",
        "0",
        "--nats",
        nats.url,
        // Own subjects and event stream on the shared server.
        "--prefix",
        uniqueRoot(),
        "--provider",
        "openai-chat",
        "--base-url",
        fake.baseUrl,
      ],
      { env: { OPENAI_API_KEY: "test-key" } },
    );
    page = await openPage(up.url, pageErrors);
  });

  afterAll(async () => {
    await page?.context().close();
    await up?.stop();
    await fake?.close();
    await nats?.stop();
  });

  it("uses the NATS server and serves the page", async () => {
    // The bus line follows the UI line (maybe in a later chunk).
    await expect
      .poll(() => up!.output().stdout)
      .toMatch(
        /^agentloop up: bus nats:\/\/127\.0\.0\.1:\d+ \(nats\); agents: assistant \(openai-chat gpt-4o-mini\)$/m,
      );
    expect(up!.output().stderr).not.toContain("in-process");
    await expect.poll(() => page!.locator(byTestId("bus-kind")).textContent()).toBe("bus: nats");
  });

  it(
    "marks the retried segment and drops the cut segment's text",
    async () => {
      const p = page!;
      await loadCharts(p);
      const recorder = await recordPage(p);
      await send(p, "retry-1", `${RETRY_MARKER}: answer me`, "enter");

      await expect.poll(() => p.locator(byTestId("chat-usage")).count(), LONG).toBe(1);
      await p.screenshot({ path: `${ARTIFACTS}/up-2-retried.png` });
      const reset = p.locator(byTestId("segment-reset"));
      expect(await reset.count()).toBe(1);
      // A cut connection is a retryable network error.
      expect(await reset.textContent()).toBe("retried: network");
      expect(await reset.getAttribute("title")).toMatch(/^NetworkError: /);
      const segments = p.locator(byTestId("segment"));
      expect(await segments.count()).toBe(2);
      expect(await segments.nth(0).getAttribute("data-attempt")).toBe("1");
      expect(await segments.nth(0).getAttribute("data-reset")).toBe("true");
      expect(await segments.nth(1).getAttribute("data-attempt")).toBe("2");
      expect(await segments.nth(1).getAttribute("data-reset")).toBeNull();

      // Only the second attempt's text is left...
      expect(await p.locator(byTestId("assistant-text")).allTextContents()).toEqual([RETRIED_TEXT.join("")]);
      expect(await p.locator(byTestId("transcript")).textContent()).not.toContain("gets cut");
      // ...though the cut attempt's text was on the page while it streamed.
      const { texts } = await recorder.read();
      expect(texts).toEqual([
        { text: CUT_TEXT.join(""), connected: false },
        { text: RETRIED_TEXT.join(""), connected: true },
      ]);
      expect(fake!.requestsTo("chat")).toHaveLength(2);

      const item = sessionItem(p, "assistant", "retry-1");
      await expect.poll(() => item.locator(byTestId("session-status")).textContent()).toBe("completed");
      await expect.poll(() => classesOf(p, "chat.done")).toContain("active-leaf");
      await expect
        .poll(() => p.locator(byTestId("control-status")).textContent())
        .toMatch(/^reply from assistant \/ retry-1 · \d+ tokens$/);
    },
    TEST_TIMEOUT,
  );

  it("rebuilds the same transcript from the JetStream log after a reload", async () => {
    const p = page!;
    await p.reload();
    await expect.poll(() => p.locator(byTestId("connection-status")).textContent()).toBe("live");
    const item = sessionItem(p, "assistant", "retry-1");
    await item.click();
    await expect.poll(() => p.locator(byTestId("transcript")).getAttribute("data-loaded")).toBe("true");
    expect(await p.locator(byTestId("user-message")).textContent()).toBe(`${RETRY_MARKER}: answer me`);
    expect(await p.locator(byTestId("assistant-text")).allTextContents()).toEqual([RETRIED_TEXT.join("")]);
    expect(await p.locator(byTestId("segment-reset")).count()).toBe(1);
    expect(await p.locator(byTestId("chat-usage")).count()).toBe(1);
  });

  it(
    "stops a streaming answer: the chat ends cancelled",
    async () => {
      const p = page!;
      await loadCharts(p);
      const recorder = await recordPage(p);
      await send(p, "slow-1", `${SLOW_MARKER}: tell me a long story`);
      // Streaming has visibly started...
      await expect.poll(() => p.locator(byTestId("transcript")).textContent(), LONG).toContain("word3 ");
      await p.screenshot({ path: `${ARTIFACTS}/up-3-streaming.png` });
      await p.click(byTestId("stop-button"));

      // ...and it ends as cancelled, not completed.
      const error = p.locator(byTestId("chat-error"));
      await expect.poll(() => error.textContent(), LONG).toBe("cancelled");
      await p.screenshot({ path: `${ARTIFACTS}/up-4-stopped.png` });
      const item = sessionItem(p, "assistant", "slow-1");
      await expect.poll(() => item.locator(byTestId("session-status")).textContent()).toBe("cancelled");
      await expect.poll(() => classesOf(p, "chat.cancelled")).toContain("active-leaf");
      const { leaves } = await recorder.read();
      const path = ["chat.iterating.toolTurn", "iteration.streaming", "chat.cancelling", "chat.cancelled"];
      expect(inOrder(leaves, path), `highlighted: ${leaves.join(" → ")}`).toEqual(path);
      expect(leaves).not.toContain("chat.done");
      expect(await p.locator(byTestId("chat-usage")).count()).toBe(0);
      expect(await p.locator(byTestId("transcript")).textContent()).not.toContain("word100 ");
      expect(fake!.requestsTo("chat")).toHaveLength(3);
      expect(pageErrors).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it("stops on SIGTERM with exit code 0", async () => {
    await page?.context().close();
    page = undefined;
    const run = await up!.stop();
    expect(run.code).toBe(0);
    // The cut stream was retried and the stop answered without a warning or a stack trace.
    expect(withoutLoadNotices(run.stderr)).toBe(
      "agentloop up: stopping: closing the UI, finishing running chats (signal again to cancel them)\n",
    );
    expect(run.stdout).toMatch(/assistant\/retry-1 #\d+ ChatCompleted/);
    expect(run.stdout).toMatch(/assistant\/slow-1 #\d+ ChatFailed/);
  });
});

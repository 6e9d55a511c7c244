import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli, stackLines, withoutLoadNotices } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;
let bus: NatsBus;
let directory: string;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "serve-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-serve-"));
});

afterAll(async () => {
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

async function ask(prefix: string, agent: string, payload: unknown): Promise<Record<string, unknown>> {
  const reply = await bus.request(chatSubject(prefix, agent), JSON.stringify(payload), { timeoutMs: 15_000 });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

describe("agentloop serve", () => {
  it("serves the default agent on NATS, prints one line, and exits 0 on SIGINT", async () => {
    const prefix = uniqueRoot();
    const serve = startServe(["--nats", server.url, "--prefix", prefix]);
    await waitUntilServing(bus, prefix, serve);
    const reply = await ask(prefix, "assistant", { session: "s1", text: "hello there" });
    expect(reply).toMatchObject({ ok: true, session: "s1", result: expect.stringMatching(/^\[demo\] /) });
    const run = await serve.stop();
    expect(run.code).toBe(0);
    expect(linesOf(run.stdout)).toHaveLength(1);
    expect(run.stdout).toMatch(
      new RegExp(
        `^agentloop serve: bus nats://127\\.0\\.0\\.1:\\d+ \\(nats, prefix ${prefix}, host [A-Za-z0-9_-]+\\); agents: assistant \\(demo model\\) — the demo model is offline`,
      ),
    );
    expect(withoutLoadNotices(run.stderr)).toBe(
      "agentloop serve: stopping: finishing running chats (signal again to cancel them)\n",
    );
  });

  it("serves the agents of an agents file, and only those", async () => {
    const prefix = uniqueRoot();
    const path = join(directory, "two.json");
    await writeFile(path, JSON.stringify({ agents: [{ name: "writer" }, { name: "critic", tools: [] }] }));
    const serve = startServe(["--nats", server.url, "--prefix", prefix, "--agents", path]);
    await waitUntilServing(bus, prefix, serve, "writer");
    expect(await ask(prefix, "critic", { session: "s1", text: "hi" })).toMatchObject({ ok: true });
    expect(await ask(prefix, "assistant", { session: "s1", text: "hi" })).toMatchObject({
      ok: false,
      error: { code: "unknown_agent" },
    });
    const run = await serve.stop();
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("agents: writer (demo model), critic (demo model)");
  });

  it("lets a running chat finish when stopped", async () => {
    const prefix = uniqueRoot();
    const serve = startServe(["--nats", server.url, "--prefix", prefix]);
    await waitUntilServing(bus, prefix, serve);
    const started = record(bus, `${prefix}.events.assistant.slow.ChatStarted`);
    await bus.flush();
    const reply = ask(prefix, "assistant", { session: "slow", text: "tell me something" });
    await started.waitFor(1, 60_000);
    const run = await serve.stop();
    expect(await reply).toMatchObject({ ok: true, result: expect.stringMatching(/^\[demo\] /) });
    expect(run.code).toBe(0);
    started.unsubscribe();
  });

  it("refuses a bad agents file at start with the path and the field", async () => {
    const path = join(directory, "bad.json");
    await writeFile(path, JSON.stringify({ agents: [{ name: "ok" }, { name: "not ok" }] }));
    const run = await runCli(["serve", "--nats", server.url, "--agents", path]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(linesOf(run.stderr)).toEqual([
      `agentloop: agents file ${path}: agents[1].name: must match ^[A-Za-z0-9_-]{1,64}$`,
    ]);
    const missing = await runCli(["serve", "--nats", server.url, "--agents"]);
    expect(missing).toMatchObject({ code: 2 });
  });

  it("says in one line when NATS cannot be reached", async () => {
    const run = await runCli(["serve", "--nats", "nats://127.0.0.1:1"]);
    expect(run.code).toBe(1);
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop serve: cannot reach NATS at nats:\/\/127\.0\.0\.1:1: /);
    expect(stackLines(run.stderr)).toEqual([]);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
    });
  });
}

describe("agentloop up", () => {
  it("without NATS: host, logger and UI on the in-process bus; a chat from the UI is answered and logged", async () => {
    const port = await freePort();
    const controller = new AbortController();
    const up = runCli(["up", "--nats", "nats://127.0.0.1:1", "--port", String(port)], {
      signal: controller.signal,
    });
    let exited = false;
    void up.then(() => {
      exited = true;
    });
    const base = `http://127.0.0.1:${port}`;
    let response: Response | undefined;
    const deadline = Date.now() + 15_000;
    while (response === undefined) {
      if (exited) throw new Error(`up exited: ${JSON.stringify(await up)}`);
      try {
        response = await fetch(`${base}/api/chat`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "assistant", session: "ui1", text: "hello from the page" }),
        });
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      ok: true,
      session: "ui1",
      result: expect.stringMatching(/^\[demo\] /),
    });
    controller.abort();
    const run = await up;
    expect(run.code).toBe(0);
    expect(linesOf(run.stderr)).toEqual([
      "agentloop up: no NATS server at nats://127.0.0.1:1; using the in-process bus (same subjects, this process only; no $SRV services, so no Agent Protocol)",
      "agentloop up: stopping: closing the UI, finishing running chats (signal again to cancel them)",
    ]);
    const lines = linesOf(run.stdout);
    expect(lines[0]).toBe(`agentloop up: UI ${base}/`);
    expect(lines[1]).toMatch(/^agentloop up: bus in-process; agents: assistant \(demo model\)/);
    // The logger: one line per event, per-token deltas left out.
    expect(
      lines.some((line) => / assistant\/ui1 #\d+ ChatStarted user hello from the page$/.test(line)),
    ).toBe(true);
    expect(lines.some((line) => /ChatCompleted done \[demo\]/.test(line))).toBe(true);
    expect(lines.some((line) => / ModelTextDelta /.test(line))).toBe(false);
  });

  it("serve --http PORT serves the UI's API on NATS behind the token, and --host without --http is refused", async () => {
    const prefix = uniqueRoot();
    const port = await freePort();
    const token = "serve-http-token-0123456789";
    const serve = startServe([
      "--nats",
      server.url,
      "--prefix",
      prefix,
      "--http",
      String(port),
      "--ui-token",
      token,
    ]);
    await waitUntilServing(bus, prefix, serve);
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/api/info`)).status).toBe(401);
    const answer = await fetch(`${base}/api/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ agent: "assistant", session: "web1", text: "hello over http" }),
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ ok: true, session: "web1" });
    // The A2A door is on the same server, behind the same token, with the agents file's agents.
    const authorization = `Bearer ${token}`;
    const card = await fetch(`${base}/a2a/assistant/.well-known/agent-card.json`, {
      headers: { authorization },
    });
    expect(card.status).toBe(200);
    expect(await card.json()).toMatchObject({
      name: "assistant",
      skills: expect.arrayContaining([expect.objectContaining({ name: "current_time" })]),
    });
    const sent = await fetch(`${base}/a2a/assistant/jsonrpc`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hello over a2a" }] } },
      }),
    });
    expect(await sent.json()).toMatchObject({
      id: 1,
      result: { task: { status: { state: "TASK_STATE_COMPLETED" } } },
    });
    const run = await serve.stop();
    expect(run.code).toBe(0);
    expect(linesOf(run.stdout)[1]).toBe(`agentloop serve: HTTP ${base}/?token=${token}`);

    const refused = await runCli(["serve", "--nats", server.url, "--host", "0.0.0.0"]);
    expect(refused.code).toBe(2);
    expect(linesOf(refused.stderr)).toEqual([
      "agentloop: --host and the --ui-* flags of serve need --http PORT",
    ]);
  });
});

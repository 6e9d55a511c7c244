import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { turn } from "../../src/testing/index.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import {
  type FakeProvider,
  linesOf,
  type RunningBinary,
  stackLines,
  startBinary,
  startFakeProvider,
  textTurn,
  waitFor,
} from "../support/cli.js";
import { type NatsServer, startNatsServer } from "../support/nats-server.js";
import { SseReader } from "../ui/ui-helpers.js";

/**
 * `agentloop ui` as the UI user of examples/roles/nats.conf (its documented least-privilege role,
 * with its own reply inbox prefix), next to a host as the host user: over HTTP it lists the
 * sessions, sends a chat, streams its events live, approves the held tool call, and replays the
 * session from the event log — with no permission refused on either side.
 */

const ROLES_CONF = fileURLToPath(new URL("../../examples/roles/nats.conf", import.meta.url));
const PREFIX = "agentloop";
const SESSION = "ui-role";

let server: NatsServer;
let model: FakeProvider;
let directory: string;
let host: RunningServe;
let ui: RunningBinary;
let uiOutput = { stdout: "", stderr: "" };
let base: URL;

function urlFor(user: string): string {
  return server.url.replace("nats://", `nats://${user}:${user}-pw@`);
}

beforeAll(async () => {
  server = await startNatsServer({ isPrivate: true, args: ["-c", ROLES_CONF] });
  model = await startFakeProvider("openai-chat", [
    turn({ toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }] }),
    textTurn("It is noon."),
  ]);
  directory = await mkdtemp(join(tmpdir(), "agentloop-ui-role-"));
  const agents = join(directory, "agents.json");
  await writeFile(
    agents,
    JSON.stringify({
      agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"] }],
    }),
  );
  host = startServe(
    ["--nats", urlFor("host"), "--inbox-prefix", "_INBOX_host", "--agents", agents, ...model.flags],
    model.env,
  );
  const alice = await NatsBus.connect({ url: urlFor("alice"), inboxPrefix: "_INBOX_alice" });
  try {
    await waitUntilServing(alice, PREFIX, host);
  } finally {
    await alice.close();
  }
  ui = startBinary(["ui", "--nats", urlFor("ui"), "--inbox-prefix", "_INBOX_ui", "--port", "0"], {
    timeoutMs: 10 * 60_000,
  });
  ui.child.stdout?.on("data", (text: string) => {
    uiOutput.stdout += text;
  });
  ui.child.stderr?.on("data", (text: string) => {
    uiOutput.stderr += text;
  });
  await waitFor(() => /^agentloop ui: http:\/\/\S+ \(bus: nats\)$/m.test(uiOutput.stdout), 60_000);
  base = new URL(/^agentloop ui: (http:\/\/\S+) \(bus: nats\)$/m.exec(uiOutput.stdout)![1]!);
}, 90_000);

afterAll(async () => {
  ui?.child.kill("SIGTERM");
  const uiRun = await ui?.result;
  const hostRun = await host?.stop();
  await model?.close();
  await server?.stop();
  await rm(directory, { recursive: true, force: true });
  // Neither the UI nor the host met a refusal (one would be logged), nor a stack trace.
  expect(uiRun?.code).toBe(0);
  expect(linesOf(uiRun?.stderr ?? "")).toEqual([]);
  expect(hostRun?.code).toBe(0);
  expect(linesOf(hostRun?.stderr ?? "")).toEqual([
    "agentloop serve: stopping: finishing running chats (signal again to cancel them)",
  ]);
  expect(stackLines(`${uiRun?.stderr}${hostRun?.stderr}`)).toEqual([]);
  uiOutput = { stdout: "", stderr: "" };
}, 60_000);

function api(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(new URL(path, base), init);
}

function postJson(path: string, body: unknown): Promise<Response> {
  return api(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

interface StreamedEvent {
  kind: string;
  session: string;
  toolCallId?: string;
  approved?: boolean;
}

/** Reads the stream until an event of `kind` arrives; returns it and every kind seen before it. */
async function readUntil(reader: SseReader, kind: string, seen: string[]): Promise<StreamedEvent> {
  for (;;) {
    const event = (await reader.next()) as StreamedEvent;
    seen.push(event.kind);
    if (event.kind === kind) return event;
  }
}

describe("the UI under the UI role", () => {
  it("chats, streams the events, approves the held call and replays the session", async () => {
    const info = await api("/api/info");
    expect(info.status).toBe(200);
    expect(await info.json()).toMatchObject({ bus: "nats", prefix: PREFIX, history: "jetstream" });

    const events = await api(`/api/events?agent=assistant&session=${SESSION}`);
    expect(events.status).toBe(200);
    const reader = new SseReader(events);
    const seen: string[] = [];
    try {
      const chat = postJson("/api/chat", { agent: "assistant", session: SESSION, text: "what time is it?" });
      const held = await readUntil(reader, "ToolApprovalRequested", seen);
      expect(held).toMatchObject({ session: SESSION, toolCallId: "call_1" });

      const approved = await postJson("/api/control", {
        agent: "assistant",
        session: SESSION,
        command: "approve",
        toolCallId: "call_1",
      });
      expect(approved.status).toBe(200);
      expect(await approved.json()).toEqual({ ok: true });

      const reply = await chat;
      expect(reply.status).toBe(200);
      expect(await reply.json()).toMatchObject({ ok: true, session: SESSION, result: "It is noon." });
      expect(await readUntil(reader, "ToolApprovalResolved", seen)).toMatchObject({
        toolCallId: "call_1",
        approved: true,
      });
      await readUntil(reader, "ChatCompleted", seen);
      expect(seen).toContain("ChatStarted");
      expect(seen).toContain("ToolCallStarted");
    } finally {
      await reader.cancel();
    }

    const sessions = await api("/api/sessions");
    expect(sessions.status).toBe(200);
    const listed = ((await sessions.json()) as { sessions: Array<{ agent: string; session: string }> })
      .sessions;
    expect(listed).toContainEqual(expect.objectContaining({ agent: "assistant", session: SESSION }));

    const replayed = await api(`/api/sessions/assistant/${SESSION}/events`);
    expect(replayed.status).toBe(200);
    const history = (await replayed.json()) as { source: string; events: StreamedEvent[] };
    expect(history.source).toBe("jetstream");
    expect(history.events.map((event) => event.kind)).toEqual(
      expect.arrayContaining([
        "ChatStarted",
        "ToolApprovalRequested",
        "ToolApprovalResolved",
        "ChatCompleted",
      ]),
    );
  }, 90_000);
});

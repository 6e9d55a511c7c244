import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import { chatTurnSse, type FakeOpenAI, startFakeOpenAI, turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { killServeProcesses, startServeProcess, waitUntilServing } from "../host/running-serve.js";
import { danglingToolCalls } from "../support/agent-harness.js";
import { runCli, toolResults, waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Black-box: a second SIGTERM to `agentloop serve` (a real process) used to exit
 * 130 at once, with no reply to the waiting clients and nothing saved. Now it cancels what runs:
 * every waiting `agentloop chat` is answered `cancelled`, each cancelled chat writes its history,
 * and only then does the host exit.
 */

const CLIENTS = 6;

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let model: FakeOpenAI | undefined;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "serve-second-signal-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-signal-"));
});

// A failed test must not leave a host running.
afterEach(() => killServeProcesses());

afterAll(async () => {
  await model?.close();
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

describe("agentloop serve on a second SIGTERM", () => {
  it(
    "answers every waiting client `cancelled`, back-fills each chat's history, then exits 130",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "signal.db");
      let stalled = 0;
      // Each chat: the model calls current_time, then stalls mid-answer until the host gives up.
      model = await startFakeOpenAI({
        chat: (request) => {
          if (toolResults("openai-chat", request.body as Record<string, unknown>).length === 0) {
            return turn({ toolCalls: [{ id: "call_time", name: "current_time", arguments: "{}" }] });
          }
          stalled += 1;
          return { ...chatTurnSse({ text: ["It is ", "…"] }), stallAfter: 2 };
        },
      });
      const serve = startServeProcess(
        [
          "--nats",
          server.url,
          "--prefix",
          prefix,
          "--db",
          db,
          "--provider",
          "openai-chat",
          "--base-url",
          model.baseUrl,
        ],
        { OPENAI_API_KEY: "test" },
      );
      await waitUntilServing(bus, prefix, serve);

      const sessions = Array.from({ length: CLIENTS }, (_, index) => `s${index + 1}`);
      const clients = sessions.map((session) =>
        runCli([
          "chat",
          "--nats",
          server.url,
          "--prefix",
          prefix,
          "--session",
          session,
          `question of ${session}`,
        ]),
      );
      await waitFor(() => stalled === CLIENTS, 60_000);

      serve.child.kill("SIGTERM");
      await waitFor(() => serve.stderr().includes("stopping"), 60_000);
      serve.child.kill("SIGTERM");

      for (const run of await Promise.all(clients)) {
        expect(run).toEqual({
          code: 130,
          stdout: "",
          stderr: "agentloop: cancelled: the host is shutting down\n",
        });
      }
      const served = await serve.run;
      expect(served.code).toBe(130);
      expect(served.stderr).toContain("agentloop serve: cancelling running chats\n");

      for (const session of sessions) {
        const history = new SqliteContextHistory({ path: db, agent: "assistant", session });
        const stored = await history.restore();
        history.close();
        // The user message, the tool call and its result: what the chat did before it was cancelled.
        expect(stored.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
        expect(stored[0]).toEqual({ role: "user", content: `question of ${session}` });
        expect(danglingToolCalls(stored)).toEqual([]);
      }
    },
  );
});

import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Subscription } from "../../src/bus/bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, sessionEventsPattern } from "../../src/bus/subjects.js";
import { pinDatabase, statement } from "../../src/context/sqlite-statements.js";
import type { AgentEvent } from "../../src/events/types.js";
import { foldJournal, type StoredJournalRecord } from "../../src/journal/journal-record.js";
import { INTERRUPTED_TOOL_RESULT } from "../../src/journal/resume-plan.js";
import { turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { killServeProcesses, startServeProcess, waitUntilServing } from "../host/running-serve.js";
import { type FakeProvider, startFakeProvider, textTurn, toolResults, waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Black-box: `agentloop serve` (the built binary) is killed with SIGKILL while a
 * non-idempotent tool (`shell`, with a side-effect counter file) runs and another message waits in
 * the session's mailbox. The next `serve` on the same database resumes the chat at once: the tool
 * is not run again, the model sees `interrupted`, then the queued message runs.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let agentsFile: string;
const providers: FakeProvider[] = [];
const subscriptions: Subscription[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "journal-crash-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-journal-crash-"));
  agentsFile = join(directory, "agents.json");
  await writeFile(agentsFile, JSON.stringify({ agents: [{ name: "assistant", tools: ["shell"] }] }));
});

afterEach(() => {
  killServeProcesses();
  for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
});

afterAll(async () => {
  await Promise.all(providers.splice(0).map((provider) => provider.close()));
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

async function provider(...args: Parameters<typeof startFakeProvider>): Promise<FakeProvider> {
  const started = await startFakeProvider(...args);
  providers.push(started);
  return started;
}

/** The texts of the chats queued in the session's journal (its records, read from the database file). */
function queuedTexts(db: string): string[] {
  const database = pinDatabase(new Database(db, { readonly: true }));
  try {
    const records = statement(
      database,
      "SELECT n, record AS text FROM chat_journal_records WHERE agent = ? AND session = ? ORDER BY n",
    ).all("assistant", "s1") as StoredJournalRecord[];
    return foldJournal(records).entry?.queued.map((queued) => queued.text) ?? [];
  } finally {
    database.close();
  }
}

describe("a serve process killed mid-tool", () => {
  it(
    "resumes the chat on restart: the tool in doubt is not re-run, then the queued chat runs",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "crash.db");
      const counter = join(directory, "counter");
      const command = `echo ran >> ${JSON.stringify(counter)} && sleep 60`;
      const common = ["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, "--db", db];
      const events: AgentEvent[] = [];
      subscriptions.push(
        bus.subscribe(sessionEventsPattern(prefix, "assistant", "s1"), (message) => {
          events.push(JSON.parse(message.data) as AgentEvent);
        }),
      );
      const kinds = (kind: AgentEvent["kind"]) => events.filter((event) => event.kind === kind);
      const chat = (text: string) =>
        bus
          .request(chatSubject(prefix, "assistant"), JSON.stringify({ session: "s1", text }), {
            timeoutMs: 60_000,
          })
          .catch(() => undefined);

      const calling = await provider("openai-chat", [
        turn({ toolCalls: [{ id: "call_1", name: "shell", arguments: JSON.stringify({ command }) }] }),
      ]);
      const serve = startServeProcess([...common, ...calling.flags], calling.env);
      await waitUntilServing(bus, prefix, serve);
      await bus.flush();

      // The requesters go away with the host.
      void chat("charge the card");
      await waitFor(() => kinds("ToolCallStarted").length === 1, 60_000);
      const chatId = kinds("ToolCallStarted")[0]!.chatId;
      void chat("and then say thanks");
      await waitFor(() => queuedTexts(db).length === 1, 60_000);
      await waitFor(() => readCounter(counter) === 1, 60_000);
      serve.child.kill("SIGKILL");
      await serve.run;

      const answering = await provider("openai-chat", [
        textTurn("The charge may or may not have gone through."),
        textTurn("Thanks!"),
      ]);
      const again = startServeProcess([...common, ...answering.flags], answering.env);
      await waitFor(() => kinds("ChatCompleted").length === 2, 60_000);

      expect(readCounter(counter)).toBe(1);
      expect(kinds("ChatResumed")).toMatchObject([{ chatId, step: "tools", fromIteration: 1 }]);
      expect(kinds("ToolCallInDoubt")).toMatchObject([{ chatId, toolCallId: "call_1", toolName: "shell" }]);
      expect(kinds("ToolCallStarted")).toHaveLength(1);
      expect(kinds("ChatCompleted")[0]).toMatchObject({
        chatId,
        result: "The charge may or may not have gone through.",
      });
      const bodies = answering.bodies();
      expect(toolResults("openai-chat", bodies[0]!)).toEqual([
        { callId: "call_1", output: INTERRUPTED_TOOL_RESULT },
      ]);
      // One linear conversation: the resumed chat, then the queued one after it.
      const roles = (bodies[1]?.messages as Array<{ role: string; content: unknown }>).map(
        (message) => message.role,
      );
      expect(roles).toEqual(["system", "user", "assistant", "tool", "assistant", "user"]);
      expect((bodies[1]?.messages as Array<{ content: unknown }>).at(-1)?.content).toBe(
        "and then say thanks",
      );
      expect(queuedTexts(db)).toEqual([]);
      again.child.kill("SIGTERM");
      expect((await again.run).code).toBe(0);
    },
  );
});

function readCounter(path: string): number {
  try {
    return readFileSync(path, "utf8")
      .split("\n")
      .filter((line) => line === "ran").length;
  } catch {
    return 0;
  }
}

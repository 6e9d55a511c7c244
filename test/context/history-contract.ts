import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ContextHistory } from "../../src/context/context-history.js";
import type { PendingApproval } from "../../src/context/pending-approval.js";
import type { Message } from "../../src/llm/types.js";
import { conversation } from "./history-fixtures.js";

/** A persisted {@link ContextHistory} with every optional method (seq marks, pending approvals). */
export type FullContextHistory = Required<ContextHistory>;

/** One test's storage: a fresh file, stream or prefix per test. */
export interface HistoryBackend {
  /** A new history instance on this storage (a second call for the same key is another writer, or a reopen). */
  open(agent: string, session: string): FullContextHistory;
  /**
   * Stores `message` as older code may have, bypassing the history's own checks (appended after
   * what the session holds).
   */
  plant(agent: string, session: string, message: Message): Promise<void>;
  /** The server's or store's max payload a single write must be able to exceed. */
  maxPayloadBytes: number;
  cleanup(): Promise<void>;
}

/**
 * The behaviour every persisted history shares: SQLite and JetStream run
 * these same cases, so a session behaves the same on either.
 */
export function describeHistoryContract(name: string, createBackend: () => Promise<HistoryBackend>): void {
  describe(`${name}: the ContextHistory contract`, () => {
    let backend: HistoryBackend;
    beforeEach(async () => {
      backend = await createBackend();
    });
    afterEach(async () => {
      await backend.cleanup();
    });

    it("restores appends in order, with tool calls, thinking blocks and images intact", async () => {
      const history = backend.open("bot", "s1");
      expect(await history.restore()).toEqual([]);
      await history.append(conversation.slice(0, 1));
      await history.append(conversation.slice(1, 3));
      await history.append([]);
      await history.append(conversation.slice(3));
      expect(await history.restore()).toEqual(conversation);
    });

    it("keeps everything for a new instance (reopened after a restart)", async () => {
      await backend.open("bot", "s1").append(conversation);
      await backend.open("bot", "s1").saveSeq(42);
      expect(await backend.open("bot", "s1").restore()).toEqual(conversation);
      expect(await backend.open("bot", "s1").loadSeq()).toBe(42);
    });

    it("never stores system messages", async () => {
      const history = backend.open("bot", "s1");
      await history.append([{ role: "system", content: "You are a bot." }, ...conversation.slice(0, 1)]);
      expect(await backend.open("bot", "s1").restore()).toEqual(conversation.slice(0, 1));
      await history.replace([
        { role: "system", content: "You are a bot." },
        { role: "user", content: "Summary." },
      ]);
      expect(await backend.open("bot", "s1").restore()).toEqual([{ role: "user", content: "Summary." }]);
    });

    it("replaces everything with a compaction's summary, then appends after it", async () => {
      const history = backend.open("bot", "s1");
      await history.append(conversation);
      await history.replace([{ role: "user", content: "Summary of the conversation." }]);
      await history.append([{ role: "user", content: "Next question" }]);
      const expected = [
        { role: "user", content: "Summary of the conversation." },
        { role: "user", content: "Next question" },
      ];
      expect(await history.restore()).toEqual(expected);
      expect(await backend.open("bot", "s1").restore()).toEqual(expected);
      await history.replace([{ role: "user", content: "Second summary." }]);
      expect(await backend.open("bot", "s1").restore()).toEqual([
        { role: "user", content: "Second summary." },
      ]);
    });

    it("clears only its own session, and takes appends after a clear", async () => {
      const mine = backend.open("bot", "s1");
      const other = backend.open("bot", "s2");
      await mine.append(conversation);
      await other.append(conversation.slice(0, 1));
      await mine.clear();
      expect(await mine.restore()).toEqual([]);
      expect(await other.restore()).toEqual(conversation.slice(0, 1));
      await mine.append([{ role: "user", content: "fresh start" }]);
      expect(await backend.open("bot", "s1").restore()).toEqual([{ role: "user", content: "fresh start" }]);
    });

    it("keys messages by agent and session", async () => {
      await backend.open("bot", "s1").append([{ role: "user", content: "bot s1" }]);
      await backend.open("bot", "s2").append([{ role: "user", content: "bot s2" }]);
      await backend.open("helper", "s1").append([{ role: "user", content: "helper s1" }]);
      expect(await backend.open("bot", "s1").restore()).toEqual([{ role: "user", content: "bot s1" }]);
      expect(await backend.open("bot", "s2").restore()).toEqual([{ role: "user", content: "bot s2" }]);
      expect(await backend.open("helper", "s1").restore()).toEqual([{ role: "user", content: "helper s1" }]);
      expect(await backend.open("helper", "s2").restore()).toEqual([]);
    });

    it("heals a stored lone surrogate on restore and stores none", async () => {
      const history = backend.open("bot", "s1");
      await history.append([{ role: "user", content: "before \ud83d" }]);
      await backend.plant("bot", "s1", { role: "assistant", content: "old \ude00 row" });
      expect(await backend.open("bot", "s1").restore()).toEqual([
        { role: "user", content: "before \ufffd" },
        { role: "assistant", content: "old \ufffd row" },
      ]);
    });

    it("stores a history larger than one max payload, in one append and in one replace", async () => {
      const history = backend.open("bot", "s1");
      const big = (label: string, count: number): Message[] =>
        Array.from({ length: count }, (_, index) => ({
          role: index % 2 === 0 ? ("user" as const) : ("assistant" as const),
          content: `${label} ${index} ${"x😀".repeat(Math.ceil(backend.maxPayloadBytes / (count * 3)))}`,
        }));
      const first = big("first", 20);
      const oneHuge: Message = {
        role: "tool",
        toolCallId: "t1",
        content: "é".repeat(backend.maxPayloadBytes),
      };
      expect(Buffer.byteLength(JSON.stringify(first))).toBeGreaterThan(backend.maxPayloadBytes * 1.1);
      await history.append(first);
      await history.append([oneHuge]);
      await history.append([{ role: "user", content: "small" }]);
      expect(await backend.open("bot", "s1").restore()).toEqual([
        ...first,
        oneHuge,
        { role: "user", content: "small" },
      ]);
      const summary = big("summary", 7);
      await history.replace(summary);
      expect(await backend.open("bot", "s1").restore()).toEqual(summary);
    });

    it("keeps a session's event seq mark: never lowered, kept by clear, per session, after reopening", async () => {
      const history = backend.open("bot", "s1");
      expect(await history.loadSeq()).toBe(0);
      await history.saveSeq(1_000);
      await history.saveSeq(400);
      expect(await history.loadSeq()).toBe(1_000);
      await backend.open("bot", "s1").saveSeq(2_000);
      expect(await history.loadSeq()).toBe(2_000);
      await history.append(conversation);
      await history.clear();
      expect(await history.loadSeq()).toBe(2_000);
      expect(await backend.open("bot", "s2").loadSeq()).toBe(0);
      expect(await backend.open("bot", "s1").loadSeq()).toBe(2_000);
    });

    it("keeps a pending tool approval per session across reopening, replaced by a newer one, taken once", async () => {
      const pending: PendingApproval = {
        chatId: "chat-1",
        iteration: 1,
        calls: [{ toolCallId: "c1", toolName: "deploy", arguments: '{"env":"prod"}' }],
        snapshot: { value: { iterating: "toolTurn" }, context: { messages: conversation } },
      };
      const history = backend.open("bot", "s1");
      expect(await history.loadPendingApproval()).toBeUndefined();
      expect(await history.takePendingApproval()).toBe(false);
      await history.savePendingApproval({ ...pending, chatId: "chat-0" });
      await history.savePendingApproval(pending);
      expect(await backend.open("bot", "s2").loadPendingApproval()).toBeUndefined();
      const reopened = backend.open("bot", "s1");
      expect(await reopened.loadPendingApproval()).toEqual(pending);
      expect(await reopened.takePendingApproval()).toBe(true);
      expect(await history.takePendingApproval()).toBe(false);
      expect(await reopened.loadPendingApproval()).toBeUndefined();

      await history.savePendingApproval(pending);
      await history.clear();
      expect(await backend.open("bot", "s1").loadPendingApproval()).toBeUndefined();
    });

    it("lets only one of two takers take a pending approval", async () => {
      const pending: PendingApproval = {
        chatId: "chat-2",
        iteration: 2,
        calls: [{ toolCallId: "c2", toolName: "deploy", arguments: "{}" }],
        snapshot: {},
      };
      await backend.open("bot", "s1").savePendingApproval(pending);
      const taken = await Promise.all([
        backend.open("bot", "s1").takePendingApproval(),
        backend.open("bot", "s1").takePendingApproval(),
      ]);
      expect(taken.filter(Boolean)).toHaveLength(1);
    });
  });
}

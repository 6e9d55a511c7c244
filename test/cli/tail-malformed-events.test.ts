import { describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { createEventLogger, followEvents } from "../../src/cli/commands/tail.js";
import type { AgentEvent, UnknownEvent } from "../../src/events/types.js";
import { waitUntil } from "../support/agent-harness.js";

/**
 * `tail` checks every payload with the one event parser: a malformed one is skipped and
 * reported with its reason; an event of a kind newer than this version is kept and printed.
 */

const base = { agent: "bot", session: "s1", chatId: "c1", ts: "2026-01-01T12:00:00.000Z", iteration: 0 };

describe("followEvents", () => {
  it("reports what is not an event with the reason, keeps a newer kind, logs the known ones", async () => {
    const bus = new LocalBus();
    const logged: Array<AgentEvent | UnknownEvent> = [];
    const invalid: string[] = [];
    const controller = new AbortController();
    const following = followEvents({
      bus,
      prefix: "agentloop",
      filter: "agentloop.events.>",
      logger: { write: (event) => void logged.push(event), close: async () => {} },
      signal: controller.signal,
      onInvalid: (subject, reason) => invalid.push(`${subject}: ${reason}`),
    });
    const subject = "agentloop.events.bot.s1.ChatStarted";
    bus.publish(subject, "{not json");
    bus.publish(subject, JSON.stringify({ ...base, seq: 1, kind: "ChatStarted" }));
    bus.publish(subject, JSON.stringify({ ...base, seq: 2, kind: "ChatStarted", text: "hi" }));
    bus.publish(
      "agentloop.events.bot.s1.ModelThoughtSummary",
      JSON.stringify({ ...base, seq: 3, kind: "ModelThoughtSummary" }),
    );
    await waitUntil(() => logged.length === 2);
    controller.abort();
    await following;
    await bus.close();
    expect(invalid).toEqual([
      `${subject}: not JSON`,
      expect.stringMatching(/^agentloop\.events\.bot\.s1\.ChatStarted: ChatStarted: text: /),
    ]);
    expect(logged.map((event) => [event.seq, event.kind])).toEqual([
      [2, "ChatStarted"],
      [3, "ModelThoughtSummary"],
    ]);
  });

  it("prints an event of a newer kind as its JSON after the usual header", () => {
    let text = "";
    const stdout = {
      write: (chunk: string) => {
        text += chunk;
        return true;
      },
      isTTY: false,
    } as unknown as NodeJS.WritableStream;
    createEventLogger({ stdout }).write({
      ...base,
      seq: 4,
      kind: "ModelThoughtSummary",
      summary: "weighing it",
    });
    expect(text).toBe(
      '12:00:00.000 bot/s1 #4 ModelThoughtSummary {"chatId":"c1","iteration":0,"summary":"weighing it"}\n',
    );
  });
});

import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Bus } from "../../src/bus/bus.js";
import { NoRespondersError } from "../../src/bus/bus-errors.js";
import {
  ChatReply,
  ControlReply,
  ERROR_CODES,
  MAX_PAYLOAD_BYTES,
  parseChatRequest,
  parseControlRequest,
} from "../../src/bus/contract.js";
import { sessionHeartbeatSubject } from "../../src/bus/subjects.js";
import { readRequestDepth } from "../../src/host/request-depth.js";
import { textOf } from "../../src/llm/types.js";
import { record } from "../bus/bus-helpers.js";
import { type HostFixture, SLOW, sleepText, startHostFixture } from "./host-fixture.js";

export interface HostContractOptions {
  /** Makes a fresh bus for one test; the suite closes it. */
  createBus(): Promise<Bus>;
  /** NATS refuses payloads over its max_payload before the host sees them. */
  canSendOversized: boolean;
  /** Random payloads per verb in the fuzz test. */
  fuzzRuns: number;
}

const usage = expect.objectContaining({
  prompt: expect.any(Number),
  completion: expect.any(Number),
  total: expect.any(Number),
  cached: expect.any(Number),
});

/**
 * The agent host's black-box contract, run once per transport: what a client sees
 * on the chat and control subjects and the events subjects.
 */
export function registerAgentHostContractTests(name: string, options: HostContractOptions): void {
  describe(`agent host over ${name}`, () => {
    const buses: Bus[] = [];
    const fixtures: HostFixture[] = [];

    async function start(fixtureOptions: Parameters<typeof startHostFixture>[1] = {}): Promise<HostFixture> {
      const bus = await options.createBus();
      buses.push(bus);
      const fixture = await startHostFixture(bus, fixtureOptions);
      fixtures.push(fixture);
      return fixture;
    }

    afterEach(async () => {
      await Promise.all(fixtures.splice(0).map((fixture) => fixture.close()));
      await Promise.all(buses.splice(0).map((bus) => bus.close()));
    });

    /** Waits until the events recorded so far satisfy `check` (a guard, not a timing assertion). */
    async function eventually(check: () => void): Promise<void> {
      await vi.waitFor(check, { timeout: 5_000, interval: 5 });
    }

    it("answers a chat with { ok, session, result, usage } and publishes its events on the documented subjects", async () => {
      const fixture = await start();
      const reply = await fixture.request("bot", "chat", { session: "s1", text: "hello" });
      expect(reply).toEqual({ ok: true, session: "s1", result: "echo: hello", usage });
      expect(Object.keys(reply as object).sort()).toEqual(["ok", "result", "session", "usage"]);
      await eventually(() =>
        expect(fixture.events.map(({ event }) => event.kind)).toContain("ChatCompleted"),
      );
      const { events } = fixture;
      for (const { subject, event } of events) {
        expect(subject).toBe(`${fixture.prefix}.events.bot.s1.${event.kind}`);
        expect(event).toMatchObject({ agent: "bot", session: "s1" });
      }
      const deltas = events.filter(({ event }) => event.kind === "ModelTextDelta").map(({ event }) => event);
      expect(deltas.map((event) => (event as { delta: string }).delta)).toEqual(["echo", ": ", "hello"]);
      // The session machine's own StateChanged events belong to no chat (chatId ""); the chat's own
      // events start with ChatStarted.
      const sessionStates = events.filter(({ event }) => event.chatId === "").map(({ event }) => event);
      expect(
        sessionStates.every((event) => event.kind === "StateChanged" && event.machine === "session"),
      ).toBe(true);
      expect(sessionStates.map((event) => (event as { state: unknown }).state)).toContain("processing");
      const kinds = events.filter(({ event }) => event.chatId !== "").map(({ event }) => event.kind);
      expect(kinds[0]).toBe("ChatStarted");
      expect(kinds.indexOf("ChatCompleted")).toBeGreaterThan(kinds.indexOf("ModelTextDelta"));
      const seqs = events.map(({ event }) => event.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    });

    it("echoes the client's message id in the reply", async () => {
      const fixture = await start();
      expect(await fixture.request("bot", "chat", { session: "s1", text: "hi", id: "m-7" })).toMatchObject({
        ok: true,
        id: "m-7",
      });
    });

    it("processes one session's messages one at a time, in the order they were sent", async () => {
      const fixture = await start();
      const texts = ["one", "two", "three", "four", "five"];
      const replies = await Promise.all(
        texts.map((text) => fixture.request("bot", "chat", { session: "s1", text })),
      );
      expect(replies.map((reply) => (reply as { result: string }).result)).toEqual(
        texts.map((text) => `echo: ${text}`),
      );
      await eventually(() =>
        expect(fixture.events.filter(({ event }) => event.kind === "ChatCompleted")).toHaveLength(5),
      );
      const started = fixture.events.flatMap(({ event }) =>
        event.kind === "ChatStarted" ? [event.text] : [],
      );
      expect(started).toEqual(texts);
      // No chat's events interleave with another's: each chat id forms one contiguous run.
      const chatIds = fixture.events.map(({ event }) => event.chatId).filter((id) => id !== "");
      const runs = chatIds.filter((id, index) => index === 0 || chatIds[index - 1] !== id);
      expect(new Set(runs).size).toBe(runs.length);
    });

    it("keeps sessions apart: each remembers its own conversation", async () => {
      const fixture = await start();
      await fixture.request("bot", "chat", { session: "a", text: "I am in a" });
      await fixture.request("bot", "chat", { session: "b", text: "I am in b" });
      await fixture.request("bot", "chat", { session: "a", text: "where am I?" });
      const last = fixture.backends.get("bot")!.requests.at(-1)!;
      const texts = last.messages.map((message) => textOf(message.content));
      expect(texts).toContain("I am in a");
      expect(texts).not.toContain("I am in b");
    });

    it("stop cancels the running chat and the queued ones; the session then serves again", async () => {
      const fixture = await start();
      const running = fixture.request("bot", "chat", { session: "s1", text: SLOW });
      const queued = fixture.request("bot", "chat", { session: "s1", text: "after the slow one" });
      await eventually(() => expect(fixture.host.sessions.find("bot", "s1")?.queueLength).toBe(1));
      expect(await fixture.request("bot", "control", { session: "s1", command: "stop" })).toEqual({
        ok: true,
      });
      expect(await running).toEqual({
        ok: false,
        error: { code: "cancelled", message: "cancelled by stop" },
      });
      expect(await queued).toEqual({ ok: false, error: { code: "cancelled", message: "cancelled by stop" } });
      expect(await fixture.request("bot", "chat", { session: "s1", text: "again" })).toMatchObject({
        ok: true,
        result: "echo: again",
      });
      await eventually(() =>
        expect(fixture.events.some(({ event }) => event.kind === "ChatFailed" && event.cancelled)).toBe(true),
      );
    });

    it("stop on a session that does not exist is a no-op", async () => {
      const fixture = await start();
      expect(await fixture.request("bot", "control", { session: "never", command: "stop" })).toEqual({
        ok: true,
      });
      expect(fixture.host.sessions.size).toBe(0);
    });

    it("new clears the session's conversation", async () => {
      const fixture = await start();
      await fixture.request("bot", "chat", { session: "s1", text: "my secret is 42" });
      expect(await fixture.request("bot", "control", { session: "s1", command: "new" })).toEqual({
        ok: true,
      });
      await fixture.request("bot", "chat", { session: "s1", text: "what is my secret?" });
      const last = fixture.backends.get("bot")!.requests.at(-1)!;
      const texts = last.messages
        .filter((message) => message.role !== "system")
        .map((m) => textOf(m.content));
      expect(texts).toEqual(["what is my secret?"]);
    });

    it("compact summarises the session and reports it in ContextCompaction events", async () => {
      const fixture = await start();
      await fixture.request("bot", "chat", { session: "s1", text: "a long story" });
      expect(
        await fixture.request("bot", "control", { session: "s1", command: "compact", topic: "plot" }),
      ).toEqual({
        ok: true,
      });
      await eventually(() =>
        expect(
          fixture.events.flatMap(({ subject, event }) =>
            event.kind === "ContextCompaction" ? [`${subject.split(".").at(-1)}:${event.phase}`] : [],
          ),
        ).toEqual(["ContextCompaction:started", "ContextCompaction:completed"]),
      );
    });

    it("answers queue_overflow for the oldest queued message past the limit", async () => {
      const fixture = await start({ host: { maxQueue: 2 } });
      const running = fixture.request("bot", "chat", { session: "s1", text: SLOW });
      await eventually(() => expect(fixture.host.sessions.find("bot", "s1")?.state).toBe("processing"));
      const first = fixture.request("bot", "chat", { session: "s1", text: "q1" });
      const second = fixture.request("bot", "chat", { session: "s1", text: "q2" });
      const third = fixture.request("bot", "chat", { session: "s1", text: "q3" });
      expect(await first).toEqual({
        ok: false,
        error: {
          code: "queue_overflow",
          message: "dropped: more than 2 messages were queued for the session",
        },
      });
      await fixture.request("bot", "control", { session: "s1", command: "stop" });
      const rest = await Promise.all([running, second, third]);
      expect(rest.map((reply) => (reply as { error: { code: string } }).error.code)).toEqual([
        "cancelled",
        "cancelled",
        "cancelled",
      ]);
    });

    it("answers unknown_agent for an agent it does not serve", async () => {
      const fixture = await start();
      expect(await fixture.request("nobody", "chat", { session: "s1", text: "hi" })).toEqual({
        ok: false,
        error: { code: "unknown_agent", message: 'no agent named "nobody" (this host serves: bot, helper)' },
      });
      expect(await fixture.request("nobody", "control", { session: "s1", command: "stop" })).toMatchObject({
        ok: false,
        error: { code: "unknown_agent" },
      });
    });

    const malformedChats: [string, string, RegExp][] = [
      ["not JSON", "hello there", /not valid JSON/],
      ["an array", "[1,2]", /must be a JSON object/],
      ["null", "null", /must be a JSON object/],
      ["a string", '"text"', /must be a JSON object/],
      ["an empty object", "{}", /missing field "session"/],
      ["no text", '{"session":"s1"}', /missing field "text"/],
      ["empty text", '{"session":"s1","text":""}', /field "text"/],
      ["a number as text", '{"session":"s1","text":42}', /field "text"/],
      ["a session with a dot", '{"session":"a.b","text":"x"}', /field "session"/],
      ["a session with a wildcard", '{"session":"*","text":"x"}', /field "session"/],
      ["a session too long", JSON.stringify({ session: "s".repeat(65), text: "x" }), /field "session"/],
      ["a non-boolean stackable", '{"session":"s1","text":"x","stackable":"yes"}', /field "stackable"/],
      ["a negative depth", '{"session":"s1","text":"x","depth":-1}', /field "depth"/],
      ["a fractional depth", '{"session":"s1","text":"x","depth":1.5}', /field "depth"/],
      ["truncated JSON", '{"session":"s1","text":"x"', /not valid JSON/],
      // Half an emoji (a lone surrogate) would be stored and poison every later request.
      [
        "a text with a lone surrogate",
        '{"session":"s1","text":"half \\ud83d"}',
        /field "text": must be well-formed/,
      ],
      [
        "a type with a lone surrogate",
        '{"session":"s1","text":"x","type":"\\udc00"}',
        /field "type": must be well-formed/,
      ],
      [
        "an id with a lone surrogate",
        '{"session":"s1","text":"x","id":"m\\ud800"}',
        /field "id": must be well-formed/,
      ],
    ];

    it.each(
      malformedChats,
    )("answers bad_request for a chat request that is %s, and keeps serving", async (_, payload, reason) => {
      const fixture = await start();
      const reply = (await fixture.request("bot", "chat", payload)) as {
        ok: boolean;
        error: { code: string; message: string };
      };
      expect(reply.ok).toBe(false);
      expect(reply.error.code).toBe("bad_request");
      expect(reply.error.message).toMatch(reason);
      expect(await fixture.request("bot", "chat", { session: "s1", text: "still here?" })).toMatchObject({
        ok: true,
      });
    });

    it("answers bad_request for malformed control requests and an invalid agent name", async () => {
      const fixture = await start();
      const bad = [
        "nope",
        "{}",
        '{"session":"s1"}',
        '{"session":"s1","command":"explode"}',
        '{"command":"stop"}',
        '{"session":"s 1","command":"stop"}',
        '{"session":"s1","command":"compact","topic":7}',
        '{"session":"s1","command":"compact","topic":"\\ud83d"}',
      ];
      for (const payload of bad) {
        expect(await fixture.request("bot", "control", payload)).toMatchObject({
          ok: false,
          error: { code: "bad_request", message: expect.any(String) },
        });
      }
      expect(await fixture.request("b+t", "chat", { session: "s1", text: "x" })).toMatchObject({
        ok: false,
        error: { code: "bad_request", message: 'invalid agent name "b+t"' },
      });
      expect(await fixture.request("bot", "control", { session: "s1", command: "stop" })).toEqual({
        ok: true,
      });
    });

    if (options.canSendOversized) {
      it("answers bad_request for an oversized request", async () => {
        const fixture = await start();
        const payload = JSON.stringify({ session: "s1", text: "x".repeat(MAX_PAYLOAD_BYTES) });
        expect(await fixture.request("bot", "chat", payload)).toMatchObject({
          ok: false,
          error: { code: "bad_request", message: expect.stringMatching(/too large/) },
        });
      });
    }

    it("gives every random or malformed payload a typed reply and keeps serving (fuzz)", async () => {
      const fixture = await start();
      const session = fc.oneof(fc.constantFrom("f1", "f2", "f-3_x"), fc.string({ maxLength: 70 }));
      const value = fc.oneof(
        fc.string({ maxLength: 40 }),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.json(),
      );
      const chatPayload = fc.oneof(
        fc.string({ maxLength: 200 }),
        fc.json({ maxDepth: 3 }),
        fc
          .record(
            {
              session,
              text: fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), value),
              type: fc.oneof(fc.constantFrom("user", "task_result"), value),
              stackable: fc.oneof(fc.boolean(), value),
              id: fc.oneof(fc.string({ maxLength: 20 }), value),
              depth: fc.oneof(fc.nat(70), value),
            },
            { requiredKeys: [] },
          )
          .map((record) => JSON.stringify(record)),
      );
      const controlPayload = fc.oneof(
        fc.string({ maxLength: 200 }),
        fc.json({ maxDepth: 3 }),
        fc
          .record(
            { session, command: fc.oneof(fc.constantFrom("stop", "new", "compact"), value), topic: value },
            { requiredKeys: [] },
          )
          .map((record) => JSON.stringify(record)),
      );
      const agent = fc.oneof(fc.constant("bot"), fc.constantFrom("helper", "ghost", "x_y"));
      const codes: string[] = [...ERROR_CODES];

      await fc.assert(
        fc.asyncProperty(agent, chatPayload, async (target, payload) => {
          const reply = ChatReply.parse(await fixture.request(target, "chat", payload));
          const isValid = parseChatRequest(payload).ok && readRequestDepth(payload).ok;
          if (target === "ghost" || target === "x_y")
            expect(reply).toMatchObject({ error: { code: "unknown_agent" } });
          else if (!isValid) expect(reply).toMatchObject({ ok: false, error: { code: "bad_request" } });
          else expect(reply.ok).toBe(true);
          if (!reply.ok) expect(codes).toContain(reply.error.code);
        }),
        { numRuns: options.fuzzRuns },
      );
      await fc.assert(
        fc.asyncProperty(controlPayload, async (payload) => {
          const reply = ControlReply.parse(await fixture.request("bot", "control", payload));
          if (!parseControlRequest(payload).ok) {
            expect(reply).toMatchObject({ ok: false, error: { code: "bad_request" } });
          }
        }),
        { numRuns: options.fuzzRuns },
      );
      expect(await fixture.request("bot", "chat", { session: "s1", text: "after the storm" })).toMatchObject({
        ok: true,
        result: "echo: after the storm",
      });
    });

    it("shuts down gracefully: stops accepting, lets a running chat finish within the grace period", async () => {
      const fixture = await start();
      const running = fixture.request("bot", "chat", { session: "s1", text: sleepText(100) });
      await eventually(() => expect(fixture.host.sessions.find("bot", "s1")?.state).toBe("processing"));
      const closing = fixture.host.close({ graceMs: 10_000 });
      expect(await running).toMatchObject({ ok: true, result: "woke" });
      await closing;
      await expect(
        fixture.request("bot", "chat", { session: "s1", text: "hello?" }, 1_000),
      ).rejects.toBeInstanceOf(NoRespondersError);
    });

    it("cancels what is still running when the grace period ends", async () => {
      const fixture = await start();
      const running = fixture.request("bot", "chat", { session: "s1", text: SLOW });
      await eventually(() => expect(fixture.host.sessions.find("bot", "s1")?.state).toBe("processing"));
      await fixture.host.close({ graceMs: 20 });
      expect(await running).toEqual({
        ok: false,
        error: { code: "cancelled", message: "the host is shutting down" },
      });
      expect(fixture.host.inFlight).toBe(0);
    });

    it("a hurried close cancels at once: every waiting caller is answered cancelled, the history back-filled", async () => {
      const fixture = await start();
      const running = fixture.request("bot", "chat", { session: "s1", text: SLOW });
      const queued = fixture.request("bot", "chat", { session: "s1", text: "after the slow one" });
      const other = fixture.request("bot", "chat", { session: "s2", text: SLOW });
      await eventually(() => {
        expect(fixture.host.sessions.find("bot", "s1")?.queueLength).toBe(1);
        expect(fixture.host.sessions.find("bot", "s2")?.state).toBe("processing");
      });
      const agent = fixture.host.sessions.find("bot", "s1")!.agent;
      const hurry = new AbortController();
      // A grace period far longer than any test: only the hurry can end it.
      const closing = fixture.host.close({ graceMs: 10 * 60_000, hurry: hurry.signal });
      hurry.abort();
      const cancelled = { ok: false, error: { code: "cancelled", message: "the host is shutting down" } };
      expect(await Promise.all([running, queued, other])).toEqual([cancelled, cancelled, cancelled]);
      await closing;
      // The cancelled chat kept its user message (the queued one never started).
      expect(agent.messages.map((message) => textOf(message.content))).toEqual([SLOW]);
    });

    it("beats on the session's heartbeat subject while a request is in hand", async () => {
      const fixture = await start({ host: { heartbeatIntervalMs: 20, hostId: "host-1" } });
      const beats = record(fixture.bus, sessionHeartbeatSubject(fixture.prefix, "bot", "s1"));
      await fixture.bus.flush();
      const running = fixture.request("bot", "chat", { session: "s1", text: SLOW });
      await beats.waitFor(3);
      expect(beats.messages.map((message) => JSON.parse(message.data))).toContainEqual({
        host: "host-1",
        agent: "bot",
        session: "s1",
        ts: expect.any(String),
        intervalMs: 20,
        requests: 1,
      });
      await fixture.request("bot", "control", { session: "s1", command: "stop" });
      expect(await running).toMatchObject({ ok: false, error: { code: "cancelled" } });
      beats.unsubscribe();
    });
  });
}

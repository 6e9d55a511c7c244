import { afterEach, describe, expect, it } from "vitest";
import type { Bus, BusMessage } from "../../src/bus/bus.js";
import type { HandlerErrorReporter } from "../../src/bus/bus-defaults.js";
import {
  BusClosedError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "../../src/bus/bus-errors.js";
import { record, uniqueRoot } from "./bus-helpers.js";

/** Makes a fresh bus; the suite closes it after each test. */
export type BusFactory = (options: { onHandlerError: HandlerErrorReporter }) => Promise<Bus>;

/**
 * The behaviour every `Bus` must show, whatever carries it: registered once per implementation
 * (LocalBus in-process, NatsBus on a real nats-server) so the two cannot drift apart.
 */
export function registerBusContractTests(name: string, createBus: BusFactory): void {
  describe(`Bus contract: ${name}`, () => {
    const opened: Bus[] = [];
    let handlerErrors: { error: unknown; message: BusMessage }[] = [];
    let root = "";

    async function open(): Promise<Bus> {
      const bus = await createBus({
        onHandlerError: (error, message) => handlerErrors.push({ error, message }),
      });
      opened.push(bus);
      return bus;
    }

    afterEach(async () => {
      await Promise.all(opened.splice(0).map((bus) => bus.close()));
      handlerErrors = [];
      root = "";
    });

    // A fresh subject root per test: tests (and files sharing one server) never see each other.
    function subject(rest: string): string {
      if (root === "") root = uniqueRoot();
      return `${root}.${rest}`;
    }

    it("delivers to an exact subscription, with subject and data", async () => {
      const bus = await open();
      const inbox = record(bus, subject("greeting"));
      bus.publish(subject("greeting"), '{"hello":"world"}');
      const [message] = await inbox.waitFor(1);
      expect(message?.subject).toBe(subject("greeting"));
      expect(message?.data).toBe('{"hello":"world"}');
      expect(message?.reply).toBeUndefined();
    });

    it("matches * to exactly one token", async () => {
      const bus = await open();
      const inbox = record(bus, subject("a.*"));
      bus.publish(subject("a"), "no: zero tokens");
      bus.publish(subject("a.b.c"), "no: two tokens");
      bus.publish(subject("x.b"), "no: other branch");
      bus.publish(subject("a.b"), "yes");
      bus.publish(subject("a.end"), "sentinel");
      // Per-subscriber order holds, so anything wrongly delivered would precede the sentinel.
      const messages = await inbox.waitFor(2);
      expect(messages.map((message) => message.data)).toEqual(["yes", "sentinel"]);
    });

    it("matches > to one or more trailing tokens, never zero", async () => {
      const bus = await open();
      const inbox = record(bus, subject("events.>"));
      bus.publish(subject("events"), "no: zero tokens");
      bus.publish(subject("other.x"), "no: other branch");
      bus.publish(subject("events.bot"), "one");
      bus.publish(subject("events.bot.s1.ModelTextDelta"), "three");
      const messages = await inbox.waitFor(2);
      expect(messages.map((message) => message.data)).toEqual(["one", "three"]);
    });

    it("combines * and > as the event subjects use them", async () => {
      const bus = await open();
      const oneSession = record(bus, subject("events.*.s42.>"));
      const botCompleted = record(bus, subject("events.bot.*.ChatCompleted"));
      bus.publish(subject("events.bot.s42.ModelTextDelta"), "1");
      bus.publish(subject("events.bot.s7.ChatCompleted"), "2");
      bus.publish(subject("events.other.s42.ChatCompleted"), "3");
      bus.publish(subject("events.bot.s42.ChatCompleted"), "4");
      expect((await oneSession.waitFor(3)).map((message) => message.data)).toEqual(["1", "3", "4"]);
      expect((await botCompleted.waitFor(2)).map((message) => message.data)).toEqual(["2", "4"]);
    });

    it("gives every plain subscriber its own copy", async () => {
      const bus = await open();
      const first = record(bus, subject("fan"));
      const second = record(bus, subject("fan"));
      const wildcard = record(bus, subject(">"));
      bus.publish(subject("fan"), "x");
      await Promise.all([first.waitFor(1), second.waitFor(1), wildcard.waitFor(1)]);
      expect([first, second, wildcard].map((inbox) => inbox.messages.length)).toEqual([1, 1, 1]);
    });

    it("keeps publish order for 1,000 messages", async () => {
      const bus = await open();
      const inbox = record(bus, subject("ordered.*"));
      const sent = Array.from({ length: 1000 }, (_, index) => String(index));
      for (const data of sent) bus.publish(subject(`ordered.s${Number(data) % 3}`), data);
      const messages = await inbox.waitFor(1000);
      expect(messages.map((message) => message.data)).toEqual(sent);
    });

    it("never runs a handler inside publish", async () => {
      const bus = await open();
      let isPublishing = false;
      let ranDuringPublish = false;
      const inbox = record(bus, subject("async"));
      bus.subscribe(subject("async"), () => {
        if (isPublishing) ranDuringPublish = true;
      });
      isPublishing = true;
      bus.publish(subject("async"), "x");
      isPublishing = false;
      await inbox.waitFor(1);
      expect(ranDuringPublish).toBe(false);
    });

    it("carries headers with their keys' case", async () => {
      const bus = await open();
      const inbox = record(bus, subject("headers"));
      bus.publish(subject("headers"), "x", { "Nats-Msg-Id": "m-1", "x-trace": "abc" });
      const [message] = await inbox.waitFor(1);
      expect(message?.headers).toEqual({ "Nats-Msg-Id": "m-1", "x-trace": "abc" });
    });

    it("answers a request through respond()", async () => {
      const bus = await open();
      bus.subscribe(subject("echo"), (message) => bus.respond(message, `echo:${message.data}`));
      const reply = await bus.request(subject("echo"), "ping", { timeoutMs: 5_000 });
      expect(reply.data).toBe("echo:ping");
    });

    it("gives a request a reply subject and resolves with the first reply only", async () => {
      const bus = await open();
      const seen: BusMessage[] = [];
      bus.subscribe(subject("twice"), (message) => {
        seen.push(message);
        bus.respond(message, "first");
        bus.respond(message, "second");
      });
      const reply = await bus.request(subject("twice"), "x", { timeoutMs: 5_000 });
      expect(reply.data).toBe("first");
      expect(seen[0]?.reply).toEqual(expect.any(String));
    });

    it("serves concurrent requests each with its own reply", async () => {
      const bus = await open();
      bus.subscribe(subject("double"), (message) => bus.respond(message, String(Number(message.data) * 2)));
      const replies = await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          bus.request(subject("double"), String(index), { timeoutMs: 5_000 }),
        ),
      );
      expect(replies.map((reply) => Number(reply.data))).toEqual(
        Array.from({ length: 20 }, (_, index) => index * 2),
      );
    });

    it("rejects a request nobody answers in time with BusTimeoutError", async () => {
      const bus = await open();
      bus.subscribe(subject("silent"), () => {});
      const failure = await bus.request(subject("silent"), "x", { timeoutMs: 150 }).catch((error) => error);
      expect(failure).toBeInstanceOf(BusTimeoutError);
      expect(failure).toMatchObject({ subject: subject("silent"), timeoutMs: 150 });
      expect(String(failure.message)).toMatch(/timed out after 150 ms/);
    });

    it("rejects a request to a subject nobody subscribes to with NoRespondersError", async () => {
      const bus = await open();
      const failure = await bus.request(subject("nobody"), "x", { timeoutMs: 5_000 }).catch((error) => error);
      expect(failure).toBeInstanceOf(NoRespondersError);
      expect(failure).toMatchObject({ subject: subject("nobody") });
    });

    it("rejects a request with the abort reason when its signal aborts", async () => {
      const bus = await open();
      bus.subscribe(subject("slow"), () => {});
      const controller = new AbortController();
      const pending = bus.request(subject("slow"), "x", { timeoutMs: 5_000, signal: controller.signal });
      controller.abort(new Error("user pressed stop"));
      await expect(pending).rejects.toThrow("user pressed stop");
      const already = bus.request(subject("slow"), "x", { signal: controller.signal });
      await expect(already).rejects.toThrow("user pressed stop");
    });

    it("splits a queue group's messages between its members, while plain subscribers get all", async () => {
      const bus = await open();
      const memberA = record(bus, subject("work"), { queue: "workers" });
      const memberB = record(bus, subject("work"), { queue: "workers" });
      const watcher = record(bus, subject("work"));
      for (let index = 0; index < 100; index++) bus.publish(subject("work"), String(index));
      await watcher.waitFor(100);
      await bus.flush();
      // Wait until the group has all 100 too (the two members together).
      const deadline = Date.now() + 5_000;
      while (memberA.messages.length + memberB.messages.length < 100 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const groupData = [...memberA.messages, ...memberB.messages].map((message) => Number(message.data));
      expect(groupData.sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, index) => index));
      expect(memberA.messages.length).toBeGreaterThan(0);
      expect(memberB.messages.length).toBeGreaterThan(0);
    });

    it("answers a request once through a queue group", async () => {
      const bus = await open();
      let served = 0;
      for (let member = 0; member < 3; member++) {
        bus.subscribe(
          subject("svc"),
          (message) => {
            served++;
            bus.respond(message, `member ${member}`);
          },
          { queue: "svc" },
        );
      }
      const reply = await bus.request(subject("svc"), "x", { timeoutMs: 5_000 });
      expect(reply.data).toMatch(/^member \d$/);
      await bus.flush();
      expect(served).toBe(1);
    });

    it("isolates a throwing handler: the publisher, other subscribers and later messages go on", async () => {
      const bus = await open();
      const thrower = record(bus, subject("boom"));
      bus.subscribe(subject("boom"), (message) => {
        throw new Error(`handler failed on ${message.data}`);
      });
      const healthy = record(bus, subject("boom"));
      expect(() => {
        for (let index = 0; index < 3; index++) bus.publish(subject("boom"), String(index));
      }).not.toThrow();
      await healthy.waitFor(3);
      await thrower.waitFor(3);
      expect(healthy.messages.map((message) => message.data)).toEqual(["0", "1", "2"]);
      expect(handlerErrors.map(({ error }) => (error as Error).message)).toEqual([
        "handler failed on 0",
        "handler failed on 1",
        "handler failed on 2",
      ]);
      expect(handlerErrors[0]?.message.subject).toBe(subject("boom"));
    });

    it("stops delivering after unsubscribe (twice is harmless)", async () => {
      const bus = await open();
      const leaving = record(bus, subject("leave"));
      const staying = record(bus, subject("leave"));
      bus.publish(subject("leave"), "before");
      await Promise.all([leaving.waitFor(1), staying.waitFor(1)]);
      leaving.unsubscribe();
      leaving.unsubscribe();
      bus.publish(subject("leave"), "after-1");
      bus.publish(subject("leave"), "after-2");
      await staying.waitFor(3);
      await bus.flush();
      expect(leaving.messages.map((message) => message.data)).toEqual(["before"]);
    });

    it("refuses invalid subscription patterns and drops publishes to invalid subjects", async () => {
      const bus = await open();
      for (const pattern of ["", "a..b", "a.>.b", "a b", ".a", "a."]) {
        expect(() => bus.subscribe(pattern, () => {}), pattern).toThrow(InvalidSubjectError);
      }
      const inbox = record(bus, subject(">"));
      expect(() => bus.publish(subject("*"), "wildcard")).not.toThrow();
      expect(() => bus.publish(subject("a.>"), "wildcard")).not.toThrow();
      expect(() => bus.publish("", "empty")).not.toThrow();
      bus.publish(subject("ok"), "sentinel");
      const messages = await inbox.waitFor(1);
      expect(messages.map((message) => message.data)).toEqual(["sentinel"]);
      await expect(bus.request("a b", "x")).rejects.toThrow(InvalidSubjectError);
    });

    it("resolves flush", async () => {
      const bus = await open();
      bus.publish(subject("flush"), "x");
      await expect(bus.flush()).resolves.toBeUndefined();
    });

    it("drains on close: what was published before still arrives", async () => {
      const bus = await open();
      const inbox = record(bus, subject("drain"));
      for (let index = 0; index < 50; index++) bus.publish(subject("drain"), String(index));
      await bus.close();
      expect(inbox.messages.map((message) => message.data)).toEqual(
        Array.from({ length: 50 }, (_, index) => String(index)),
      );
    });

    it("after close: publish is dropped quietly, subscribe and request fail with BusClosedError", async () => {
      const bus = await open();
      await bus.close();
      await bus.close();
      expect(() => bus.publish(subject("late"), "x")).not.toThrow();
      expect(() => bus.subscribe(subject("late"), () => {})).toThrow(BusClosedError);
      await expect(bus.request(subject("late"), "x")).rejects.toThrow(BusClosedError);
      await expect(bus.flush()).resolves.toBeUndefined();
    });

    it("fails a request still waiting when the bus closes", async () => {
      const bus = await open();
      bus.subscribe(subject("never"), () => {});
      const pending = bus.request(subject("never"), "x", { timeoutMs: 10_000 });
      const outcome = pending.catch((error) => error);
      await bus.flush();
      await bus.close();
      expect(await outcome).toBeInstanceOf(BusClosedError);
    });
  });
}

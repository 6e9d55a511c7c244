import { describe, expect, it } from "vitest";
import { BusTimeoutError } from "../../src/bus/bus-errors.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { registerBusContractTests } from "./bus-contract.js";
import { record } from "./bus-helpers.js";

registerBusContractTests("LocalBus", async ({ onHandlerError }) => new LocalBus({ onHandlerError }));

describe("LocalBus", () => {
  it("says it is local", () => {
    expect(new LocalBus().kind).toBe("local");
  });

  it("delivers what a handler publishes after the current message, not inside it", async () => {
    const bus = new LocalBus();
    const order: string[] = [];
    bus.subscribe("chain.start", () => {
      bus.publish("chain.next", "x");
      order.push("start handler done");
    });
    bus.subscribe("chain.next", () => order.push("next handler"));
    bus.publish("chain.start", "x");
    await bus.flush();
    await bus.flush();
    expect(order).toEqual(["start handler done", "next handler"]);
    await bus.close();
  });

  it("picks queue group members round-robin", async () => {
    const bus = new LocalBus();
    const members = [0, 1, 2].map(() => record(bus, "jobs", { queue: "workers" }));
    for (let index = 0; index < 9; index++) bus.publish("jobs", String(index));
    await bus.flush();
    expect(members.map((member) => member.messages.map((message) => message.data))).toEqual([
      ["0", "3", "6"],
      ["1", "4", "7"],
      ["2", "5", "8"],
    ]);
    await bus.close();
  });

  it("flush resolves only once everything published before it was delivered", async () => {
    const bus = new LocalBus();
    const inbox = record(bus, "flushed.>");
    for (let index = 0; index < 10; index++) bus.publish(`flushed.${index}`, "x");
    await bus.flush();
    expect(inbox.messages).toHaveLength(10);
    await bus.close();
  });

  it("skips messages already queued for a subscriber that unsubscribes in its handler", async () => {
    const bus = new LocalBus();
    const seen: string[] = [];
    const subscription = bus.subscribe("once", (message) => {
      seen.push(message.data);
      subscription.unsubscribe();
    });
    bus.publish("once", "1");
    bus.publish("once", "2");
    await bus.flush();
    expect(seen).toEqual(["1"]);
    await bus.close();
  });

  it("copies headers at publish time", async () => {
    const bus = new LocalBus();
    const inbox = record(bus, "copied");
    const headers = { key: "before" };
    bus.publish("copied", "x", headers);
    headers.key = "after";
    await inbox.waitFor(1);
    expect(inbox.messages[0]?.headers).toEqual({ key: "before" });
    await bus.close();
  });

  it("counts publishes it dropped", async () => {
    const bus = new LocalBus();
    bus.publish("bad..subject", "x");
    await bus.close();
    bus.publish("fine", "x");
    expect(bus.droppedPublishes).toBe(2);
  });

  it("uses its default request timeout when the caller gives none", async () => {
    const bus = new LocalBus({ defaultRequestTimeoutMs: 50 });
    bus.subscribe("quiet", () => {});
    await expect(bus.request("quiet", "x")).rejects.toBeInstanceOf(BusTimeoutError);
    await bus.close();
  });

  it("reports a throwing handler on stderr by default", async () => {
    const bus = new LocalBus();
    const lines: unknown[][] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => lines.push(args);
    try {
      bus.subscribe("loud", () => {
        throw new TypeError("bad handler");
      });
      bus.publish("loud", "x");
      await bus.flush();
    } finally {
      console.error = original;
    }
    expect(lines).toEqual([["agentloop bus: a subscriber of loud threw: TypeError: bad handler"]]);
    await bus.close();
  });
});

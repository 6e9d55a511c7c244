import { describe, expect, it } from "vitest";
import { type HeldMessage, HeldMessages } from "../../src/bus/held-messages.js";

function event(subject: string, bytes = 10): HeldMessage {
  return { subject, data: "x".repeat(bytes), isReply: false, bytes };
}

describe("HeldMessages", () => {
  it("keeps messages in order and gives them all back once", () => {
    const held = new HeldMessages(10, 1_000);
    held.add(event("a"));
    held.add(event("b"));
    expect([held.size, held.bytes]).toEqual([2, 20]);
    expect(held.takeAll().map((message) => message.subject)).toEqual(["a", "b"]);
    expect([held.size, held.bytes, held.takeAll()]).toEqual([0, 0, []]);
  });

  it("refuses and counts events beyond the message or the byte bound", () => {
    const held = new HeldMessages(2, 25);
    expect(held.add(event("a"))).toBe(true);
    expect(held.add(event("too big", 20))).toBe(false);
    expect(held.add(event("b"))).toBe(true);
    expect(held.add(event("c", 1))).toBe(false);
    expect(held.dropped).toBe(2);
    expect(held.takeAll().map((message) => message.subject)).toEqual(["a", "b"]);
    expect(held.dropped).toBe(0);
  });

  it("always keeps a reply: a client is waiting for it", () => {
    const held = new HeldMessages(1, 10);
    held.add(event("a"));
    expect(held.add({ ...event("reply", 50), isReply: true })).toBe(true);
    expect(held.takeAll().map((message) => message.subject)).toEqual(["a", "reply"]);
  });
});

import { describe, expect, it } from "vitest";
import { SharedProbes } from "../../src/cluster/pass-on.js";

/** A probe whose answers the test gives, one per call, and a clock the test moves. */
function fixture(freshMs = 250) {
  let now = 1_000;
  const calls: { subject: string; answer(isAnswered: boolean): void; fail(): void }[] = [];
  const probes = new SharedProbes(
    (subject) =>
      new Promise<boolean>((resolve, reject) => {
        calls.push({ subject, answer: resolve, fail: () => reject(new Error("connection closed")) });
      }),
    freshMs,
    () => now,
  );
  return {
    probes,
    calls,
    advance(ms: number) {
      now += ms;
    },
  };
}

describe("SharedProbes", () => {
  it("sends one probe for the requests that arrive while it is under way, and gives each its answer", async () => {
    const { probes, calls } = fixture();
    const first = probes.isReachable("hosts.h2.agents.a.chat");
    const second = probes.isReachable("hosts.h2.agents.a.chat");
    const other = probes.isReachable("hosts.h3.agents.a.chat");
    expect(calls.map((call) => call.subject)).toEqual(["hosts.h2.agents.a.chat", "hosts.h3.agents.a.chat"]);
    calls[0]!.answer(true);
    calls[1]!.answer(false);
    expect(await Promise.all([first, second, other])).toEqual([true, true, false]);
  });

  it("counts an answered probe for the fresh window only, measured from when it was sent", async () => {
    const { probes, calls, advance } = fixture(250);
    const probing = probes.isReachable("s");
    advance(100);
    calls[0]!.answer(true);
    await probing;
    advance(149);
    expect(await probes.isReachable("s")).toBe(true);
    expect(calls).toHaveLength(1);
    advance(1);
    const again = probes.isReachable("s");
    expect(calls).toHaveLength(2);
    calls[1]!.answer(true);
    expect(await again).toBe(true);
  });

  it("never remembers silence or a failed probe: the next request probes again, and a silent owner forgets its earlier answer", async () => {
    const { probes, calls, advance } = fixture(250);
    const answered = probes.isReachable("s");
    calls[0]!.answer(true);
    await answered;
    advance(300);
    const silent = probes.isReachable("s");
    calls[1]!.answer(false);
    expect(await silent).toBe(false);
    const failed = probes.isReachable("s");
    calls[2]!.fail();
    expect(await failed).toBe(false);
    const next = probes.isReachable("s");
    expect(calls).toHaveLength(4);
    calls[3]!.answer(true);
    expect(await next).toBe(true);
  });
});

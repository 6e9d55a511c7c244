import { afterAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import { workerNatsServer } from "../support/nats-server.js";

/**
 * Regression: agent A asking B asking A through Agent Protocol targets deadlocked both `default`
 * sessions (A's waited for B's answer, B's for A's) until someone sent `stop`. The lineage header
 * now travels with the protocol prompt, and A's host refuses the question that comes back to a
 * session already waiting on the chain with `cycle`, which B's model reads as a typed tool error.
 */

const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** Asks the protocol agent `other`; given a tool result, answers with it. */
function askingOver(other: string) {
  return (request: ScriptedRequest): ScriptedStep => {
    const last = request.messages.at(-1);
    if (last?.role === "tool") return { text: `${other} result: ${textOf(last.content)}` };
    return { toolCalls: [{ name: "ask_agent", arguments: { target: { agent: other }, message: "loop?" } }] };
  };
}

describe("A → B → A through protocol targets", () => {
  it("ends with a cycle tool error at once instead of a deadlock", async () => {
    const { url } = await workerNatsServer();
    const hosts: RunningHost[] = [];
    const buses: NatsBus[] = [];
    const events: AgentEvent[] = [];
    for (const [prefix, name, other] of [
      ["cyca", "cyc-alpha", "cyc-beta"],
      ["cycb", "cyc-beta", "cyc-alpha"],
    ] as const) {
      const bus = await NatsBus.connect({ url, name });
      buses.push(bus);
      hosts.push(
        await startHost({
          bus,
          prefix,
          graceMs: 0,
          agents: [{ name, tools: ["ask_agent"], backend: new ScriptedBackend(askingOver(other)) }],
          onEvent: (event) => events.push(event),
        }),
      );
    }
    closers.push(async () => {
      for (const host of hosts) await host.close();
      for (const bus of buses) await bus.close();
    });
    const [alphaBus] = buses;
    const reply = await alphaBus!.request(
      chatSubject("cyca", "cyc-alpha"),
      JSON.stringify({ session: "default", text: "start" }),
      { timeoutMs: 30_000 },
    );
    const answer = JSON.parse(reply.data) as { ok: boolean; result?: string };
    expect(answer).toMatchObject({ ok: true });
    // Beta's question back to alpha's waiting session was refused as a cycle; beta's model read the code.
    const betaFailed = events.find((event) => event.agent === "cyc-beta" && event.kind === "ToolCallFailed");
    expect(betaFailed).toMatchObject({ toolName: "ask_agent", error: { code: "cycle" } });
    expect(JSON.parse((betaFailed as { result: string }).result)).toMatchObject({ code: "cycle" });
    expect(answer.result).toContain("cyc-beta result: cyc-alpha result:");
    // Beta's chat carried its lineage: asked by alpha's default session, which is the root.
    const betaStarted = events.find((event) => event.agent === "cyc-beta" && event.kind === "ChatStarted");
    expect(betaStarted?.parent).toMatchObject({ agent: "cyc-alpha", session: "default" });
    expect(betaStarted?.root).toMatchObject({ agent: "cyc-alpha", session: "default" });
  });
});

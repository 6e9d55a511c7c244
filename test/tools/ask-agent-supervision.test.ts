import { afterEach, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { createAskAgentToolSet } from "../../src/tools/ask-agent.js";
import { runToolCall } from "../../src/tools/tool-runner.js";
import { createTestToolContext } from "./tool-context.js";

/** What `ask_agent` does when the asked agent fails: report it typed (default), or retry first. */

const buses: LocalBus[] = [];
afterEach(async () => {
  for (const bus of buses.splice(0)) await bus.close();
});

const usage = { prompt: 0, completion: 0, total: 0, cached: 0 };

/** A `helper` that fails its first `failures` questions with `code`, then answers. */
function flakyHelper(failures: number, code: string): { bus: LocalBus; asked: () => number } {
  const bus = new LocalBus();
  buses.push(bus);
  let asked = 0;
  bus.subscribe("acme.agents.helper.chat", (message) => {
    asked++;
    const reply =
      asked <= failures
        ? { ok: false, error: { code, message: "the model is down" } }
        : { ok: true, session: "x", result: "fine", usage };
    bus.respond(message, JSON.stringify(reply));
  });
  return { bus, asked: () => asked };
}

const call = { id: "k1", name: "ask_agent", arguments: JSON.stringify({ agent: "helper", message: "hi" }) };

describe("ask_agent supervision", () => {
  it("reports a failed child to the model as a typed error by default", async () => {
    const { bus, asked } = flakyHelper(1, "llm_error");
    const toolSet = createAskAgentToolSet({ bus, prefix: "acme", agent: "bot" });
    const outcome = await runToolCall(call, [toolSet], createTestToolContext({ agent: "bot" }));
    expect(JSON.parse(outcome.result)).toEqual({
      error: 'agent "helper" could not answer (llm_error): the model is down',
      code: "agent_failed",
    });
    expect(asked()).toBe(1);
  });

  it("retries a failed child as the policy says, then gets its answer", async () => {
    const { bus, asked } = flakyHelper(2, "llm_error");
    const toolSet = createAskAgentToolSet({
      bus,
      prefix: "acme",
      agent: "bot",
      supervision: { kind: "retry", times: 2, backoffMs: 1 },
    });
    const outcome = await runToolCall(call, [toolSet], createTestToolContext({ agent: "bot" }));
    expect(outcome).toMatchObject({ ok: true, result: "fine" });
    expect(asked()).toBe(3);
  });

  it("never retries a cycle", async () => {
    const { bus, asked } = flakyHelper(5, "cycle");
    const toolSet = createAskAgentToolSet({
      bus,
      prefix: "acme",
      agent: "bot",
      supervision: { kind: "retry", times: 3, backoffMs: 1 },
    });
    const outcome = await runToolCall(call, [toolSet], createTestToolContext({ agent: "bot" }));
    expect(JSON.parse(outcome.result)).toMatchObject({ code: "cycle" });
    expect(asked()).toBe(1);
  });

  it("refuses at the depth cap with depth_exceeded, asking nobody", async () => {
    const { bus, asked } = flakyHelper(0, "llm_error");
    const toolSet = createAskAgentToolSet({ bus, prefix: "acme", agent: "bot", maxDepth: 2 });
    const outcome = await runToolCall(call, [toolSet], createTestToolContext({ agent: "bot", depth: 2 }));
    expect(JSON.parse(outcome.result)).toMatchObject({ code: "depth_exceeded" });
    expect(asked()).toBe(0);
  });

  function idleBus(): LocalBus {
    const bus = new LocalBus();
    buses.push(bus);
    return bus;
  }

  it("retries an A2A target whose card cannot be read, then reports it typed; the fail policy fails the chat", async () => {
    let fetched = 0;
    // An A2A agent that is down: every read of its card fails.
    const down: typeof fetch = async () => {
      fetched++;
      return new Response("down for maintenance", { status: 503 });
    };
    const a2aCall = {
      id: "k2",
      name: "ask_agent",
      arguments: JSON.stringify({ target: { a2a: "http://127.0.0.1:9/card.json" }, message: "hi" }),
    };
    const retrying = createAskAgentToolSet({
      bus: idleBus(),
      agent: "bot",
      a2a: { fetch: down },
      supervision: { kind: "retry", times: 2, backoffMs: 1 },
    });
    const outcome = await runToolCall(a2aCall, [retrying], createTestToolContext({ agent: "bot" }));
    expect(JSON.parse(outcome.result)).toMatchObject({ code: "unavailable" });
    expect(fetched).toBe(3);

    const failing = createAskAgentToolSet({
      bus: idleBus(),
      agent: "bot",
      a2a: { fetch: down },
      supervision: { kind: "fail" },
    });
    const fatal = await failing
      .invoke(a2aCall, createTestToolContext({ agent: "bot" }))
      .catch((error) => error);
    expect(fatal).toMatchObject({ code: "agent_failed", failsChat: true });
    expect((fatal as Error).message).toContain(
      "the A2A agent at http://127.0.0.1:9/card.json failed (unavailable",
    );
  });
});

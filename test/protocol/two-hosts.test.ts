import { afterEach, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { ScriptedBackend } from "../../src/testing/index.js";
import { workerNatsServer } from "../support/nats-server.js";

/**
 * A second agentloop host calls the first one's agent through `ask_agent` over the NATS
 * agent protocol (discovery on `$SRV.INFO.agents`, the prompt endpoint, the streamed reply), not
 * over our own contract: the two hosts use different subject prefixes, so only the protocol joins them.
 */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function connect(name: string): Promise<NatsBus> {
  const bus = await NatsBus.connect({ url: (await workerNatsServer()).url, name });
  closers.push(() => bus.close());
  return bus;
}

async function host(options: Parameters<typeof startHost>[0]): Promise<RunningHost> {
  const started = await startHost(options);
  closers.push(() => started.close());
  return started;
}

describe("two agentloop hosts on one NATS system", () => {
  it("one host's agent asks the other's over the agent protocol and gets its answer", async () => {
    const expertBus = await connect("expert host");
    const expertModel = new ScriptedBackend((request) => {
      const question = request.messages.at(-1);
      return { text: `The answer to "${String(question?.content)}" is 42.` };
    });
    await host({
      bus: expertBus,
      prefix: "protoexpert",
      agents: [{ name: "expert-x", systemPrompt: "You know answers.", tools: [], backend: expertModel }],
    });

    const askerBus = await connect("asker host");
    const askerModel = new ScriptedBackend((request) => {
      const last = request.messages.at(-1);
      if (last?.role === "tool") return { text: `My colleague says: ${String(last.content)}` };
      return {
        toolCalls: [
          {
            name: "ask_agent",
            arguments: { target: { agent: "expert-x" }, message: "what is six times seven?" },
          },
        ],
      };
    });
    const events: AgentEvent[] = [];
    await host({
      bus: askerBus,
      prefix: "protoasker",
      agents: [{ name: "asker", systemPrompt: "You ask.", tools: ["ask_agent"], backend: askerModel }],
      onEvent: (event) => events.push(event),
    });

    const reply = await askerBus.request(
      chatSubject("protoasker", "asker"),
      JSON.stringify({ session: "s1", text: "ask the expert" }),
      { timeoutMs: 60_000 },
    );
    const answer = JSON.parse(reply.data) as { ok: boolean; result?: string };
    expect(answer).toMatchObject({ ok: true });
    expect(answer.result).toBe('My colleague says: The answer to "what is six times seven?" is 42.');
    // The expert saw exactly the asker's message: one chat, over the protocol.
    expect(expertModel.requests).toHaveLength(1);
    const completed = events.find((event) => event.kind === "ToolCallCompleted");
    expect(completed).toMatchObject({ toolName: "ask_agent" });
  });
});

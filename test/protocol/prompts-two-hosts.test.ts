import { afterEach, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { hostSubject } from "../../src/cluster/session-cluster.js";
import { assignShards } from "../../src/cluster/shard-map.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { promptAgent } from "../../src/protocol/agent-client.js";
import { protocolSubject } from "../../src/protocol/protocol-subjects.js";
import { ScriptedBackend } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { workerNatsServer } from "../support/nats-server.js";

/**
 * Two hosts of one agent under one owner: the queue group hands each Agent Protocol prompt to
 * either host, and the host that does not own the session's shard forwards the prompt to the one
 * that does, which streams the answer to the caller. (Before shards, 3 of 8 such prompts failed
 * with `500 … session owned by host …`.)
 */

const closers: Array<() => Promise<void>> = [];

async function waitForAsync(condition: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("the condition did not hold in time");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function host(prefix: string, hostId: string, model: ScriptedBackend): Promise<RunningHost> {
  const bus = await NatsBus.connect({ url: (await workerNatsServer()).url, name: hostId });
  closers.push(() => bus.close());
  const started = await startHost({
    bus,
    prefix,
    hostId,
    shards: 16,
    agents: [{ name: "helper", systemPrompt: "You help.", tools: [], backend: model }],
  });
  closers.push(() => started.close());
  return started;
}

describe("Agent Protocol prompts to two hosts of one agent", () => {
  it("all succeed, each session's prompts answered by the one host that owns it", async () => {
    const prefix = uniqueRoot();
    const answered: string[] = [];
    const model = (hostId: string) =>
      new ScriptedBackend((request) => {
        const prompt = String(request.messages.at(-1)?.content);
        answered.push(`${hostId}:${prompt}`);
        return { text: `answer to ${prompt}` };
      });
    await host(prefix, "ha", model("ha"));
    await host(prefix, "hb", model("hb"));
    const client = await NatsBus.connect({ url: (await workerNatsServer()).url, name: "ap-client" });
    closers.push(() => client.close());
    // The second host's share of the shards handed over (so no session moves mid-test).
    const expected = assignShards(16, ["ha", "hb"]);
    await waitForAsync(async () => {
      for (const id of ["ha", "hb"]) {
        const reply = await client.request(`${hostSubject(prefix, id)}.sessions`, "", { timeoutMs: 5_000 });
        const held = (JSON.parse(reply.data) as { shards?: number }).shards;
        if (held !== expected.filter((owner) => owner === id).length) return false;
      }
      return true;
    });
    const prompts = Array.from({ length: 8 }, (_, index) => ({ session: `p${index}`, text: `q${index}` }));
    // Twice each: the second prompt of a session must reach the same host as the first.
    for (const round of [1, 2]) {
      const answers = await Promise.all(
        prompts.map(async ({ session, text }) => {
          const subject = protocolSubject("prompt", "helper", "agentloop", session);
          let reply = "";
          for await (const chunk of promptAgent(client.connection, subject, `${text} r${round}`)) {
            if (chunk.type === "response") reply += chunk.text;
          }
          return reply;
        }),
      );
      expect(answers).toEqual(prompts.map(({ text }) => `answer to ${text} r${round}`));
    }
    // Each session ran on one host only.
    for (const { text } of prompts) {
      const hosts = new Set(
        answered.filter((line) => line.includes(`${text} r`)).map((line) => line.split(":")[0]),
      );
      expect(hosts.size).toBe(1);
    }
    expect(answered).toHaveLength(16);
    // Both hosts answered some: the prompts that landed on the other one were forwarded.
    expect(new Set(answered.map((line) => line.split(":")[0]))).toEqual(new Set(["ha", "hb"]));
  });
});

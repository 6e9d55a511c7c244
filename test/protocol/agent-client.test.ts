import { randomUUID } from "node:crypto";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  AgentNoRespondersError,
  AgentNotFoundError,
  AgentOfflineError,
  AgentServiceError,
  AgentStreamTimeoutError,
  AmbiguousTargetError,
  askProtocolAgent,
  promptAgent,
  QUERY_REFUSAL,
} from "../../src/protocol/agent-client.js";
import { discoverAgents } from "../../src/protocol/discovery.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { type FakeProtocolAgent, startFakeProtocolAgent } from "./fake-protocol-agent.js";

describe("the protocol client against a fake agent on a real nats-server", () => {
  let server: NatsServer;
  let connection: NatsConnection;
  const agents: FakeProtocolAgent[] = [];
  /** An owner no other suite uses, so discovery on the shared server finds only this test's agents. */
  let owner: string;

  beforeAll(async () => {
    server = await workerNatsServer();
    connection = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await connection.drain();
    await server.stop();
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
  });

  async function startAgent(name: string, agent = "fakebot"): Promise<FakeProtocolAgent> {
    const fake = await startFakeProtocolAgent({ url: server.url, agent, owner, name });
    agents.push(fake);
    return fake;
  }

  it("discovers the agent with its metadata and endpoints", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    const fake = await startAgent("s1");
    const found = (await discoverAgents(connection)).filter((agent) => agent.owner === owner);
    expect(found).toEqual([
      {
        id: fake.id,
        agent: "fakebot",
        owner,
        name: "s1",
        protocolVersion: "0.3",
        promptSubject: fake.promptSubject,
        endpoints: [
          { name: "prompt", subject: fake.promptSubject },
          { name: "status", subject: `agents.status.fakebot.${owner}.s1` },
        ],
        metadata: { agent: "fakebot", owner, protocol_version: "0.3", session: "s1" },
      },
    ]);
  });

  it("streams the ack and the response chunks, and ends at the terminator", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    const fake = await startAgent("s1");
    const chunks = [];
    for await (const chunk of promptAgent(connection, fake.promptSubject, "hi there")) chunks.push(chunk);
    expect(chunks).toEqual([
      { type: "status", status: "ack" },
      { type: "response", text: "echo: " },
      { type: "response", text: "hi there" },
      { type: "response", text: " (done)" },
    ]);
    expect(fake.prompts).toEqual(["hi there"]);
  });

  it("asks by target, skips unknown chunk types and joins the text", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    await startAgent("s1");
    const answer = await askProtocolAgent(connection, { target: { owner, name: "s1" }, message: "hello" });
    expect(answer.text).toBe("echo: hello (done)");
    expect(answer.agent.name).toBe("s1");
    const ignored = await askProtocolAgent(connection, { target: { owner }, message: "ignored" });
    expect(ignored.text).toBe("only this");
  });

  it("turns an error reply into an AgentServiceError with its status and description", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    await startAgent("s1");
    const failure = await askProtocolAgent(connection, {
      target: { owner },
      message: "error: 429 too many prompts",
    }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(AgentServiceError);
    expect(failure).toMatchObject({ code: "agent_protocol", status: 429, description: "too many prompts" });
  });

  it("answers a query with the refusal and reads on", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    await startAgent("s1");
    const answer = await askProtocolAgent(connection, { target: { owner }, message: "ask me" });
    expect(answer).toMatchObject({ text: `you said: ${QUERY_REFUSAL}`, queries: 1 });
  });

  it("cancels by unsubscribing: the agent sees its reply subject lose interest", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    const fake = await startAgent("s1");
    const controller = new AbortController();
    const stream = promptAgent(connection, fake.promptSubject, "hang", { signal: controller.signal });
    const first = await stream.next();
    expect(first.value).toEqual({ type: "status", status: "ack" });
    controller.abort(new Error("stop"));
    await expect(
      (async () => {
        for await (const _chunk of stream) {
          // keep-alives until the abort is seen
        }
      })(),
    ).rejects.toThrow("stop");
    await fake.interestLost;
  });

  it("notices an agent whose heartbeats stop mid-answer, long before the inactivity limit", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    const fake = await startAgent("s1");
    const failure = askProtocolAgent(connection, { target: { owner }, message: "silent" }).catch(
      (error: unknown) => error,
    );
    await waitFor(() => fake.prompts.length === 1);
    // One heartbeat after the prompt arrived (so the caller was listening), then none.
    const sent = fake.heartbeatsSent();
    await waitFor(() => fake.heartbeatsSent() > sent);
    fake.stopHeartbeats();
    const error = await failure;
    expect(error).toBeInstanceOf(AgentOfflineError);
    expect((error as Error).message).toBe(
      `the agent went offline: no heartbeat on agents.hb.fakebot.${owner}.s1 for 3 s`,
    );
  });

  it("fails a silent stream after the inactivity limit", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    // Nobody answers on this subject's reply, but something listens: a silent agent.
    const subject = `agents.prompt.silent.${owner}.s1`;
    const silent = connection.subscribe(subject);
    try {
      const stream = promptAgent(connection, subject, "anyone?", { inactivityMs: 50 });
      await expect(stream.next()).rejects.toBeInstanceOf(AgentStreamTimeoutError);
    } finally {
      silent.unsubscribe();
    }
  });

  it("reports a prompt subject nobody listens on", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    const stream = promptAgent(connection, `agents.prompt.gone.${owner}.s1`, "hello?");
    await expect(stream.next()).rejects.toBeInstanceOf(AgentNoRespondersError);
  });

  it("says which agents exist when the target matches none, and refuses an ambiguous one", async () => {
    owner = `o-${randomUUID().slice(0, 8)}`;
    await startAgent("s1");
    await startAgent("s2");
    const missing = await askProtocolAgent(connection, {
      target: { owner, name: "s3" },
      message: "hi",
    }).catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(AgentNotFoundError);
    expect((missing as AgentNotFoundError).available).toEqual(
      expect.arrayContaining([`fakebot/${owner}/s1`, `fakebot/${owner}/s2`]),
    );
    const ambiguous = await askProtocolAgent(connection, { target: { owner }, message: "hi" }).catch(
      (error: unknown) => error,
    );
    expect(ambiguous).toBeInstanceOf(AmbiguousTargetError);
    expect((ambiguous as Error).message).toContain("give owner and/or name too");
  });
});

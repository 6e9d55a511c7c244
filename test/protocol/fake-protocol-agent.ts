import { type Service, type ServiceMsg, Svcm } from "@nats-io/services";
import { connect, errors, type NatsConnection } from "@nats-io/transport-node";

/**
 * A FAKE agent of another framework, speaking the Synadia Agent Protocol v0.3 the way the notes
 * (/work/shared/interop/nats-agent-protocol.md) describe it: an `agents` micro service with
 * metadata {agent, owner, protocol_version, session}, a `prompt` endpoint on
 * `agents.prompt.<agent>.<owner>.<name>` in queue group `agents`, a `status` endpoint and
 * heartbeats on `agents.hb.<agent>.<owner>.<name>`. How it answers depends on the prompt:
 *
 * - `error: <code> <text>`: an error reply (headers) then the terminator;
 * - `ask me`: ack, a `query` chunk, then `you said: <answer>` with the caller's answer;
 * - `hang`: ack, then keep-alives sent as requests until the reply subject loses interest
 *   (no responders), which resolves {@link FakeProtocolAgent.interestLost};
 * - `silent`: ack, then nothing at all (an agent that died mid-answer once its heartbeats stop);
 * - `ignored`: ack, an unknown chunk type, a response, the terminator;
 * - anything else: ack, `echo: `, the prompt, ` (done)` as three response chunks (the last in the
 *   `{text}` form), the terminator.
 */
export interface FakeProtocolAgent {
  agent: string;
  owner: string;
  name: string;
  promptSubject: string;
  /** The service id (the heartbeats' `instance_id`). */
  id: string;
  /** Prompts received, in order. */
  prompts: string[];
  /** Resolves once a `hang` prompt's reply subject has no listener any more. */
  interestLost: Promise<void>;
  /** Heartbeats sent so far. */
  heartbeatsSent(): number;
  /** Stops sending heartbeats (the service still answers discovery). */
  stopHeartbeats(): void;
  close(): Promise<void>;
}

export interface FakeProtocolAgentOptions {
  url: string;
  agent: string;
  owner: string;
  name: string;
  /** Default 1. */
  heartbeatIntervalS?: number;
}

export async function startFakeProtocolAgent(options: FakeProtocolAgentOptions): Promise<FakeProtocolAgent> {
  const { agent, owner, name } = options;
  const intervalS = options.heartbeatIntervalS ?? 1;
  const connection = await connect({ servers: options.url });
  // @nats-io/services pins its own nats-core release: the same connection, a different type identity.
  const service: Service = await new Svcm(connection as unknown as ConstructorParameters<typeof Svcm>[0]).add(
    {
      name: "agents",
      version: "0.3.0",
      description: "a fake protocol agent for tests",
      metadata: { agent, owner, protocol_version: "0.3", session: name },
      queue: "agents",
    },
  );
  const id = service.info().id;
  const heartbeat = (): string =>
    JSON.stringify({
      agent,
      owner,
      session: name,
      instance_id: id,
      ts: new Date().toISOString(),
      interval_s: intervalS,
    });
  const prompts: string[] = [];
  let markInterestLost: () => void = () => {};
  const interestLost = new Promise<void>((resolve) => {
    markInterestLost = resolve;
  });
  const promptSubject = `agents.prompt.${agent}.${owner}.${name}`;

  service.addEndpoint("prompt", {
    subject: promptSubject,
    queue: "agents",
    metadata: { max_payload: "1MB", attachments_ok: "false" },
    handler: (error, message) => {
      if (error !== null) return;
      const prompt = message.string();
      prompts.push(prompt);
      void answer(connection, message, prompt, markInterestLost);
    },
  });
  service.addEndpoint("status", {
    subject: `agents.status.${agent}.${owner}.${name}`,
    handler: (error, message) => {
      if (error === null) message.respond(heartbeat());
    },
  });
  let heartbeatsSent = 0;
  const beat = (): void => {
    connection.publish(`agents.hb.${agent}.${owner}.${name}`, heartbeat());
    heartbeatsSent++;
  };
  beat();
  let timer: NodeJS.Timeout | undefined = setInterval(beat, intervalS * 1000);
  await connection.flush();

  return {
    agent,
    owner,
    name,
    promptSubject,
    id,
    prompts,
    interestLost,
    heartbeatsSent: () => heartbeatsSent,
    stopHeartbeats: () => {
      clearInterval(timer);
      timer = undefined;
    },
    close: async () => {
      clearInterval(timer);
      await service.stop();
      await connection.drain();
    },
  };
}

async function answer(
  connection: NatsConnection,
  message: ServiceMsg,
  prompt: string,
  onInterestLost: () => void,
): Promise<void> {
  const reply = message.reply;
  if (!reply) return;
  const send = (chunk: unknown): void => connection.publish(reply, JSON.stringify(chunk));
  const end = (): void => connection.publish(reply, "");
  const error = /^error: (\d+) (.*)$/.exec(prompt);
  if (error) {
    message.respondError(Number(error[1]), error[2] ?? "");
    end();
    return;
  }
  send({ type: "status", data: "ack" });
  if (prompt === "ask me") {
    const inbox = `_INBOX.fake-query.${Math.random().toString(36).slice(2)}`;
    const subscription = connection.subscribe(inbox, { max: 1 });
    send({ type: "query", data: { id: "q1", reply_subject: inbox, prompt: "which colour?" } });
    for await (const answerMessage of subscription) {
      send({ type: "response", data: `you said: ${answerMessage.string()}` });
    }
    end();
    return;
  }
  if (prompt === "hang") {
    // Keep-alives as requests: once the caller unsubscribed, the server answers "no responders".
    while (true) {
      try {
        await connection.request(reply, JSON.stringify({ type: "status", data: "working" }), {
          timeout: 200,
        });
      } catch (requestError) {
        if (isNoResponders(requestError)) {
          onInterestLost();
          return;
        }
        if (connection.isClosed() || connection.isDraining()) return;
      }
    }
  }
  if (prompt === "silent") return;
  if (prompt === "ignored") {
    send({ type: "thinking", data: "hmm" });
    send({ type: "response", data: "only this" });
    end();
    return;
  }
  send({ type: "response", data: "echo: " });
  send({ type: "response", data: prompt });
  send({ type: "response", data: { text: " (done)" } });
  end();
}

function isNoResponders(error: unknown): boolean {
  if (error instanceof errors.NoRespondersError) return true;
  return error instanceof errors.RequestError && error.isNoResponders();
}

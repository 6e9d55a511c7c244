import { connect, createInbox, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAgentloopError } from "../../src/errors/agentloop-error.js";
import { CallerGoneError } from "../../src/protocol/caller-gone-error.js";
import { PromptStream } from "../../src/protocol/prompt-stream.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

describe("PromptStream on a real nats-server", () => {
  let server: NatsServer;
  let connection: NatsConnection;
  /** The keep-alive never fires on its own: only the first probe (sent at once) runs. */
  const timers = { setInterval: () => undefined, clearInterval: () => {} };

  beforeAll(async () => {
    server = await workerNatsServer();
    connection = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await connection.drain();
    await server.stop();
  });

  it("aborts its signal with a CallerGoneError (code cancelled) once nobody listens on the reply subject", async () => {
    const replySubject = createInbox();
    const stream = new PromptStream({ connection, replySubject, keepAliveMs: 10_000, timers });
    await waitFor(() => stream.signal.aborted);
    const reason: unknown = stream.signal.reason;
    expect(reason).toBeInstanceOf(CallerGoneError);
    expect(isAgentloopError(reason) && reason.code).toBe("cancelled");
    expect(reason).toMatchObject({ replySubject, retryable: false, name: "CallerGoneError" });
    stream.end();
  });

  it("keeps its signal while the caller listens: the probe arrives as an ack", async () => {
    const replySubject = createInbox();
    const received: string[] = [];
    const subscription = connection.subscribe(replySubject, {
      callback: (_error, message) => {
        received.push(message.string());
      },
    });
    await connection.flush();
    const stream = new PromptStream({ connection, replySubject, keepAliveMs: 10_000, timers });
    await waitFor(() => received.length === 1);
    expect(JSON.parse(received[0]!)).toEqual({ type: "status", data: "ack" });
    stream.end();
    await waitFor(() => received.length === 2);
    expect(received[1]).toBe("");
    expect(stream.signal.aborted).toBe(false);
    subscription.unsubscribe();
  });
});

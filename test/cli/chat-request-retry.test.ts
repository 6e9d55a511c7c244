import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { runCli } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Remote `chat` sends its request with an `id` and, when the reply is lost (the host went silent:
 * NATS restarted while the reply was on its way), sends the same request again: a host answers a
 * repeated id from what it stored, so the answer is recovered without running the chat twice.
 * A stand-in host loses the first reply on purpose and answers the repeat.
 */

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "chat-retry-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

describe("remote chat retries a lost reply with its request id", () => {
  it("recovers the answer from the repeat, with the same id and payload", { timeout: 60_000 }, async () => {
    const prefix = uniqueRoot();
    const requests: Record<string, unknown>[] = [];
    const subscription = bus.subscribe(chatSubject(prefix, "assistant"), (message) => {
      const request = JSON.parse(message.data) as Record<string, unknown>;
      requests.push(request);
      // The first reply is lost: no answer, no heartbeat. The repeat is answered from "storage".
      if (requests.length === 1 || message.reply === undefined) return;
      bus.publish(
        message.reply,
        JSON.stringify({
          ok: true,
          session: request.session,
          result: "the stored answer",
          usage: { prompt: 1, completion: 1, total: 2, cached: 0 },
        }),
      );
    });
    try {
      await bus.flush();
      const run = await runCli([
        "chat",
        "--nats",
        server.url,
        "--prefix",
        prefix,
        "--session",
        "r1",
        "hello",
      ]);
      expect(run).toEqual({ code: 0, stdout: "the stored answer\n", stderr: "" });
      expect(requests).toHaveLength(2);
      expect(requests[0]).toMatchObject({
        session: "r1",
        text: "hello",
        id: expect.stringMatching(/^chat-/),
      });
      expect(requests[1]).toEqual(requests[0]);
    } finally {
      subscription.unsubscribe();
    }
  });
});

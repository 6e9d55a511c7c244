import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Role, type StreamResponse, TaskState } from "@a2a-js/sdk";
import { ClientFactory, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { createA2aDoor } from "../../src/doors/a2a/a2a-door.js";
import {
  chatTurnSse,
  type FakeProvider,
  stallAfterFrames,
  startFakeProvider,
} from "../../src/testing/index.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import {
  killServeProcesses,
  type ServeProcess,
  startServeProcess,
  waitUntilServing,
} from "../host/running-serve.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * A task survives its host: two `serve` processes (dist/) share a nats-server with `--history nats`;
 * the host running a task's chat is killed mid-stream (SIGKILL). The door (in this process) notices
 * the silence, asks again by the task's id, the session's next owner resumes the journaled chat, and
 * the A2A client's stream ends COMPLETED; GetTask then answers from the event log.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let agentsFile: string;
let model: FakeProvider | undefined;
let door: UiServer | undefined;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "a2a-failover-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-a2a-failover-"));
  agentsFile = join(directory, "agents.json");
  await writeFile(agentsFile, JSON.stringify({ agents: [{ name: "assistant", tools: ["current_time"] }] }));
});

afterEach(async () => {
  killServeProcesses();
  await door?.close();
  await model?.close();
});

afterAll(async () => {
  await bus.close();
  await rm(directory, { recursive: true, force: true });
});

function startHost(hostId: string, prefix: string, provider: FakeProvider): ServeProcess {
  return startServeProcess(
    [
      ...["--nats", server.url, "--prefix", prefix, "--agents", agentsFile],
      ...["--history", "nats", "--lease-ttl", "2s", "--host-id", hostId],
    ],
    provider.env,
    90_000,
  );
}

describe("an A2A task across a host failover", () => {
  it(
    "completes on the session's next owner after its host is killed mid-stream",
    { timeout: 90_000 },
    async () => {
      const prefix = uniqueRoot();
      model = await startFakeProvider("openai-chat", {
        script: (_request, index) =>
          index === 0
            ? stallAfterFrames(chatTurnSse({ text: ["The full", " answer."] }), 2)
            : { text: "The full answer." },
      });
      const hosts = new Map([
        ["h1", startHost("h1", prefix, model)],
        ["h2", startHost("h2", prefix, model)],
      ]);
      for (const host of hosts.values()) await waitUntilServing(bus, prefix, host);
      const owners: string[] = [];
      const watch = bus.subscribe(`${prefix}.events.assistant.*.ChatStarted`, (message) => {
        owners.push(String((JSON.parse(message.data) as { host?: string }).host));
      });
      door = await startUiServer({
        bus,
        prefix,
        natsConnection: bus.connection,
        doors: [createA2aDoor({ agents: [{ name: "assistant", description: "failover", skills: [] }] })],
      });
      const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(
        `${new URL(door.url).origin}/a2a/assistant/.well-known/agent-card.json`,
        "",
      );
      const items: StreamResponse[] = [];
      const streaming = (async () => {
        const message = {
          messageId: "m1",
          contextId: "s1",
          taskId: "",
          role: Role.ROLE_USER,
          parts: [
            {
              content: { $case: "text" as const, value: "tell me" },
              metadata: undefined,
              filename: "",
              mediaType: "",
            },
          ],
          metadata: undefined,
          extensions: [],
          referenceTaskIds: [],
        };
        for await (const item of client.sendMessageStream({
          tenant: "",
          message,
          configuration: undefined,
          metadata: undefined,
        })) {
          items.push(item);
        }
      })();
      await waitFor(() => model?.requests.length === 1 && owners.length === 1, 60_000);
      const owner = hosts.get(owners[0] ?? "");
      expect(owner).toBeDefined();
      owner?.child.kill("SIGKILL");
      await streaming;
      watch.unsubscribe();
      const last = items.at(-1)?.payload;
      expect(last?.$case === "statusUpdate" ? last.value.status?.state : undefined).toBe(
        TaskState.TASK_STATE_COMPLETED,
      );
      const first = items[0]?.payload;
      const taskId = first?.$case === "task" ? first.value.id : "";
      const task = await client.getTask({ tenant: "", id: taskId });
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const answer = task.artifacts[0]?.parts[0]?.content;
      expect(answer?.$case === "text" ? answer.value : "").toBe("The full answer.");
      // The stalled request, then the resumed chat's: nothing ran twice.
      expect(model.requests).toHaveLength(2);
    },
  );
});

import { afterAll, beforeAll } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { registerAgentHostContractTests } from "./agent-host-contract.js";

let server: NatsServer;

beforeAll(async () => {
  server = await workerNatsServer();
});

afterAll(async () => {
  await server.stop();
});

registerAgentHostContractTests("a real nats-server", {
  createBus: () => NatsBus.connect({ url: server.url, name: "agent-host-test" }),
  // nats-server refuses a payload over its max_payload (1 MiB) before any host could see it.
  canSendOversized: false,
  fuzzRuns: 1_000,
});

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../../src/bus/local-bus.js";
import { createHttpDoors } from "../../../src/doors/http-doors.js";
import { type RunningHost, startHost } from "../../../src/host/start-host.js";
import { ScriptedBackend } from "../../../src/testing/index.js";
import { startUiServer, type UiServer } from "../../../src/ui/ui-server.js";

/**
 * The MCP door of `up` without a NATS server: the in-process bus has no `$SRV` services to
 * discover the agents on, so the door lists the agents this process serves (the doors' profiles).
 */

let bus: LocalBus;
let host: RunningHost;
let ui: UiServer;
let client: Client;

beforeAll(async () => {
  bus = new LocalBus();
  const backend = new ScriptedBackend((request) => ({
    text: `local: ${String(request.messages.at(-1)?.content ?? "")}`,
  }));
  host = await startHost({ bus, agents: [{ name: "assistant", backend }] });
  ui = await startUiServer({
    bus,
    doors: createHttpDoors({ a2aAgents: [{ name: "assistant", description: "in-process", skills: [] }] }),
  });
  client = new Client({ name: "mcp-local-bus-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", ui.url)));
});

afterAll(async () => {
  await client?.close();
  await ui?.close();
  await host?.close();
  await bus?.close();
});

describe("the MCP door on the in-process bus", () => {
  it("lists the agents this process serves and answers a call through the bus contract", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["assistant"]);
    const result = await client.callTool({ name: "assistant", arguments: { message: "hi there" } });
    expect(result.content).toEqual([{ type: "text", text: "local: hi there" }]);
  });
});

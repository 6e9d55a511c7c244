import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../../src/bus/nats-bus.js";
import { AgentProtocolHost } from "../../../src/protocol/agent-protocol-host.js";
import { type HostFixture, startHostFixture } from "../../host/host-fixture.js";
import { BIN_PATH, cleanEnv } from "../../support/cli.js";
import { assertFreshBuild } from "../../support/fresh-build.js";
import { type NatsServer, workerNatsServer } from "../../support/nats-server.js";

/**
 * `agentloop mcp` (the built binary) as an MCP server on stdio, driven by the MCP SDK's Client
 * (which spawns it, as Claude Desktop or an IDE would), against an in-process host on the worker's
 * nats-server. One process serves every case.
 */

let server: NatsServer;
let bus: NatsBus;
let fixture: HostFixture;
let protocol: AgentProtocolHost;
let client: Client;
let stderr = "";

beforeAll(async () => {
  assertFreshBuild();
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "mcp-stdio" });
  fixture = await startHostFixture(bus);
  protocol = await AgentProtocolHost.start({
    connection: bus.connection,
    host: fixture.host,
    owner: "stdio",
  });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN_PATH, "mcp", "--nats", server.url, "--prefix", fixture.prefix],
    env: cleanEnv() as Record<string, string>,
    stderr: "pipe",
  });
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  client = new Client({ name: "mcp-stdio-test", version: "1.0.0" });
  await client.connect(transport);
}, 30_000);

afterAll(async () => {
  await client?.close();
  await protocol?.stop();
  await fixture?.close();
  await protocol?.drained();
  await bus?.close();
});

describe("agentloop mcp (stdio)", () => {
  it("lists the agents of its prefix and answers a call with the text and structured usage", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["bot", "helper"]);
    const result = await client.callTool({
      name: "helper",
      arguments: { message: "over stdio", session: "io-1" },
    });
    expect(result.content).toEqual([{ type: "text", text: "echo: over stdio" }]);
    expect(result.structuredContent).toMatchObject({
      agent: "helper",
      session: "io-1",
      result: "echo: over stdio",
      usage: { total: expect.any(Number) },
    });
    expect(stderr).toContain(`serving the agents of prefix "${fixture.prefix}"`);
  });

  it("answers an unknown agent with an MCP error and keeps serving", async () => {
    const error = await client.callTool({ name: "ghost", arguments: { message: "hi" } }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    const again = await client.callTool({ name: "bot", arguments: { message: "still here" } });
    expect(again.content).toEqual([{ type: "text", text: "echo: still here" }]);
  });
});

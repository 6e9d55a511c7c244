import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { createAgentCatalog } from "../../doors/mcp/agent-catalog.js";
import { AgentTaskStore } from "../../doors/mcp/agent-task-store.js";
import { createMcpAgentServer } from "../../doors/mcp/mcp-agent-server.js";
import type { Command } from "../cli-context.js";
import { connectCommandToNats } from "../command-helpers.js";

/**
 * `agentloop mcp [--nats URL] [--prefix P]`: agentloop as an MCP server on stdin/stdout, for MCP
 * clients that start their servers as processes (Claude Desktop, IDEs, the MCP Inspector). One
 * tool per agent served on the NATS system under the prefix (whichever hosts serve them); see
 * {@link createMcpAgentServer}. Stdout carries only MCP messages; notices go to stderr. Ends when
 * the client closes stdin, or on SIGINT / SIGTERM.
 */
export const mcpCommand: Command = async (context) => {
  const { config } = context;
  const bus = await connectCommandToNats(context, "mcp");
  if (typeof bus === "number") return bus;
  try {
    const catalog = createAgentCatalog({ prefix: config.prefix, connection: bus.connection });
    const taskStore = new AgentTaskStore();
    const server = createMcpAgentServer({ bus, prefix: config.prefix, catalog, taskStore });
    const transport = new StdioServerTransport(
      (context.stdin ?? process.stdin) as Readable,
      context.stdout as Writable,
    );
    const closed = new Promise<void>((resolve) => {
      transport.onclose = () => resolve();
      context.signal.addEventListener("abort", () => resolve(), { once: true });
      (context.stdin ?? process.stdin).once("end", () => resolve());
    });
    await server.connect(transport);
    context.stderr.write(
      `agentloop mcp: serving the agents of prefix "${config.prefix}" on ${redactNatsUrl(config.natsUrl)} over stdio\n`,
    );
    await closed;
    await server.close();
    // Finished tasks' expiry timers would keep the process alive.
    taskStore.cleanup();
    return 0;
  } finally {
    await bus.close();
  }
};

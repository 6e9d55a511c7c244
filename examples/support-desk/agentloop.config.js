import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "agentloop";
import { issueRefund, lookupOrder } from "./tools.js";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

export default defineConfig({
  agents: [
    {
      name: "triage",
      systemPrompt:
        "You are the first line of a coffee-gear shop's support desk. Look orders up before you answer. " +
        "Hand refund requests to the refunds agent with ask_agent.",
      tools: [lookupOrder, "current_time", "ask_agent"],
    },
    {
      name: "refunds",
      systemPrompt:
        "You handle refunds. Read the refund policy (refunds.md in the folder policies__list_allowed_directories names) " +
        "and the order, " +
        "then issue the refund the policy allows. A person approves every refund.",
      tools: [lookupOrder, issueRefund],
      // The policies folder, served read-only by the reference MCP file server, confined to it.
      mcpServers: {
        policies: {
          command: process.execPath,
          args: [
            require.resolve("@modelcontextprotocol/server-filesystem/dist/index.js"),
            join(here, "policies"),
          ],
        },
      },
    },
  ],
});

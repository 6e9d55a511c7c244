import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "agentloop";
import { isKeyless, keylessModel } from "./keyless-model.js";
import { issueRefund, lookupOrder } from "./tools.js";

const here = dirname(fileURLToPath(import.meta.url));
// Without an API key each agent plays a scripted part (keyless-model.js), so the whole desk runs
// offline; with ANTHROPIC_API_KEY or OPENAI_API_KEY set, the real provider answers instead.
const keyless = isKeyless();

export default defineConfig({
  agents: [
    {
      name: "triage",
      systemPrompt:
        "You are the first line of a coffee-gear shop's support desk. Look orders up before you answer. " +
        "Hand refund requests to the refunds agent with ask_agent.",
      tools: [lookupOrder, "current_time", "ask_agent"],
      ...(keyless ? { backend: keylessModel("triage") } : {}),
    },
    {
      name: "refunds",
      systemPrompt:
        "You handle refunds. Read the refund policy (policies__read_policy, topic refunds) and the order, " +
        "then issue the refund the policy allows. A person approves every refund.",
      tools: [lookupOrder, issueRefund],
      // The desk's own MCP server (policies-server.js), started over stdio: it serves ./policies only.
      mcpServers: {
        policies: { command: process.execPath, args: [join(here, "policies-server.js")] },
      },
      ...(keyless ? { backend: keylessModel("refunds") } : {}),
    },
  ],
});

#!/usr/bin/env node
// The desk's policies as an MCP server over stdio: agentloop starts it for the refunds agent (see
// `mcpServers` in agentloop.config.js) and offers its tools to the model as `policies__<tool>`.
// It serves only the Markdown files of ./policies, by topic, so a model cannot read anything else.
// Written on the SDK's low-level server with a plain JSON Schema: it starts fast and needs no zod.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const folder = join(dirname(fileURLToPath(import.meta.url)), "policies");
/** The topics are the file names, read once: a topic is checked against this list, never joined as given. */
const topics = readdirSync(folder)
  .filter((file) => file.endsWith(".md"))
  .map((file) => file.slice(0, -".md".length));

const readPolicy = {
  name: "read_policy",
  description: `Reads one of the shop's policies, by topic (${topics.join(", ")}).`,
  inputSchema: {
    type: "object",
    properties: { topic: { type: "string", enum: topics, description: "The policy to read." } },
    required: ["topic"],
  },
};

const server = new Server(
  { name: "support-desk-policies", version: "1.0.0" },
  { capabilities: { tools: {} } },
);

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [readPolicy] }));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  if (request.params.name !== readPolicy.name) {
    return { isError: true, content: [{ type: "text", text: `no tool "${request.params.name}"` }] };
  }
  const topic = request.params.arguments?.topic;
  if (typeof topic !== "string" || !topics.includes(topic)) {
    const text = `no policy ${JSON.stringify(topic)} (topics: ${topics.join(", ")})`;
    return { isError: true, content: [{ type: "text", text }] };
  }
  return { content: [{ type: "text", text: readFileSync(join(folder, `${topic}.md`), "utf8") }] };
});

await server.connect(new StdioServerTransport());

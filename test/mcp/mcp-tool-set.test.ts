import { afterEach, describe, expect, it } from "vitest";
import type { Message } from "../../src/llm/types.js";
import { McpServerConnection } from "../../src/mcp/mcp-server-connection.js";
import { createMcpToolSet } from "../../src/mcp/mcp-tool-set.js";
import { runToolCall } from "../../src/tools/tool-runner.js";
import type { ToolContext } from "../../src/tools/tool-set.js";
import { everythingStdio } from "./mcp-servers.js";

/** An MCP server's tools as a ToolSet, through the tool runner, against the real "everything" server. */

let connection: McpServerConnection | undefined;
afterEach(async () => {
  await connection?.close();
  connection = undefined;
});

function context(appended: Message[]): ToolContext {
  return {
    signal: new AbortController().signal,
    appendMessage: (message) => appended.push(message),
    agent: "bot",
    session: "s",
  };
}

describe("the MCP ToolSet", () => {
  it("offers the server's tools namespaced, with their input schemas as they are", async () => {
    connection = new McpServerConnection({ name: "everything", config: everythingStdio() });
    await connection.start();
    const toolSet = createMcpToolSet(connection);
    const echo = toolSet.tools().find((tool) => tool.name === "everything__echo");
    expect(echo).toEqual({
      name: "everything__echo",
      description: "Echoes back the input string",
      parameters: connection.tools.find((tool) => tool.name === "echo")?.inputSchema,
    });
    expect(toolSet.copy()).toBe(toolSet);
  });

  it("returns text, attaches images, and turns bad arguments and tool errors into error results", async () => {
    connection = new McpServerConnection({ name: "everything", config: everythingStdio() });
    await connection.start();
    const toolSets = [createMcpToolSet(connection)];
    const appended: Message[] = [];
    const run = (name: string, args: string) =>
      runToolCall({ id: "c", name, arguments: args }, toolSets, context(appended));

    expect(await run("everything__get-sum", '{"a": 2, "b": 3}')).toMatchObject({
      ok: true,
      result: expect.stringContaining("5"),
    });

    const image = await run("everything__get-tiny-image", "{}");
    expect(image).toMatchObject({ ok: true, result: expect.stringContaining("[image: image/png") });
    expect(appended).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "The image(s) returned by everything__get-tiny-image:" },
          { type: "image", mediaType: "image/png", data: expect.any(String) },
        ],
      },
    ]);

    const notJson = await run("everything__echo", "{oops");
    expect(notJson.ok).toBe(false);
    expect(JSON.parse(notJson.result).error).toMatch(
      /^arguments for tool "everything__echo" are not valid JSON/,
    );

    // The server validates the arguments against its schema and answers with an error.
    const wrong = await run("everything__echo", '{"message": 42}');
    expect(wrong).toMatchObject({ ok: false, cancelled: false });
    expect(JSON.parse(wrong.result)).toEqual({ error: expect.any(String) });
  });
});

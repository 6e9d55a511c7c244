import { describe, expect, it } from "vitest";
import { z } from "zod";
import { LocalBus } from "../../src/bus/local-bus.js";
import { createAskAgentToolSet } from "../../src/tools/ask-agent.js";
import { createCurrentTimeToolSet } from "../../src/tools/builtin/current-time.js";
import { createTodoListToolSet } from "../../src/tools/builtin/todo-list.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createShellToolSet } from "../../src/tools/shell.js";

const call = (name: string) => ({ id: "c1", name, arguments: "{}" });

describe("which tools are idempotent (run again on resume)", () => {
  it("a defined tool is not, unless it says so", () => {
    const parameters = z.object({});
    const plain = defineTool({ name: "plain", description: "d", parameters, execute: () => "" });
    const reader = defineTool({
      name: "reader",
      description: "d",
      parameters,
      idempotent: true,
      execute: () => "",
    });
    expect(plain.idempotent).toBe(false);
    expect(reader.idempotent).toBe(true);
    const set = createToolSet({ name: "s", tools: [plain, reader] });
    expect(set.isIdempotent(call("plain"))).toBe(false);
    expect(set.isIdempotent(call("reader"))).toBe(true);
    expect(set.isIdempotent(call("unknown"))).toBe(false);
  });

  it("the built-ins declare what they are", () => {
    expect(createCurrentTimeToolSet().isIdempotent?.(call("current_time"))).toBe(true);
    expect(createTodoListToolSet().isIdempotent?.(call("todo_list"))).toBe(true);
    expect(createShellToolSet().isIdempotent?.(call("shell"))).toBe(false);
    const askAgent = createAskAgentToolSet({ bus: new LocalBus() });
    expect(askAgent.isIdempotent?.(call("ask_agent"))).toBe(false);
  });
});

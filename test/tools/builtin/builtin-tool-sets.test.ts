import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  builtinToolSets,
  createBuiltinToolSetRegistry,
  defaultToolSetRegistry,
  UnknownToolSetError,
} from "../../../src/tools/builtin/index.js";
import { createToolSet } from "../../../src/tools/create-tool-set.js";
import { defineTool } from "../../../src/tools/define-tool.js";
import { createTestToolContext } from "../tool-context.js";

describe("builtinToolSets", () => {
  it("builds the named built-in sets in the order given", () => {
    const sets = builtinToolSets(["current_time", "todo_list"]);
    expect(sets.map((set) => set.name)).toEqual(["current_time", "todo_list"]);
    expect(defaultToolSetRegistry.names()).toEqual(expect.arrayContaining(["todo_list", "current_time"]));
  });

  it("builds a fresh stateful set each time", () => {
    const [first] = builtinToolSets(["todo_list"]);
    const [second] = builtinToolSets(["todo_list"]);
    expect(first).not.toBe(second);
  });

  it("refuses an unknown name with the known ones", () => {
    const registry = createBuiltinToolSetRegistry();
    const attempt = () => builtinToolSets(["todo_list", "telepathy"], { registry });
    expect(attempt).toThrow(UnknownToolSetError);
    expect(attempt).toThrow('unknown tool set "telepathy" (known: todo_list, current_time)');
  });

  it("takes sets registered later, with the factory context", async () => {
    const registry = createBuiltinToolSetRegistry().register("whoami", (context) =>
      createToolSet({
        name: "whoami",
        tools: [
          defineTool({
            name: "whoami",
            description: "",
            parameters: z.object({}),
            execute: () => context.agent ?? "nobody",
          }),
        ],
      }),
    );
    expect(registry.has("whoami")).toBe(true);
    const [whoami] = builtinToolSets(["whoami"], { registry, context: { agent: "bot" } });
    await expect(
      whoami?.invoke({ id: "c", name: "whoami", arguments: "{}" }, createTestToolContext()),
    ).resolves.toBe("bot");
  });

  it("passes the injected clock to current_time", async () => {
    const [clock] = builtinToolSets(["current_time"], {
      registry: createBuiltinToolSetRegistry(),
      context: { now: () => new Date("2030-01-01T00:00:00.000Z") },
    });
    const result = await clock?.invoke(
      { id: "c", name: "current_time", arguments: "" },
      createTestToolContext(),
    );
    expect(new Date(result?.split(" ")[0] ?? "").toISOString()).toBe("2030-01-01T00:00:00.000Z");
  });
});

import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { ToolNotFoundError } from "../../src/tools/tool-errors.js";
import { createTestToolContext } from "./tool-context.js";

const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  execute: (args) => args.text,
});

describe("createToolSet", () => {
  it("offers its tools' definitions and dispatches calls by name", async () => {
    const toolSet = createToolSet({ name: "basic", tools: [echo], prompt: "Use echo." });
    expect(toolSet.name).toBe("basic");
    expect(toolSet.tools()).toEqual([echo.definition]);
    expect(toolSet.prompt()).toBe("Use echo.");
    expect(toolSet.iterationPromptInjection()).toBe("");
    await expect(
      toolSet.invoke({ id: "c1", name: "echo", arguments: '{"text":"hi"}' }, createTestToolContext()),
    ).resolves.toBe("hi");
  });

  it("rejects a call to a tool it does not have", async () => {
    const toolSet = createToolSet({ name: "basic", tools: [echo] });
    const error = await toolSet
      .invoke({ id: "c1", name: "nope", arguments: "{}" }, createTestToolContext())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolNotFoundError);
    expect((error as Error).message).toBe("tool not found: nope");
  });

  it("shares a stateless set and gives a prompt-only set no tools", () => {
    const stateless = createToolSet({ name: "basic", tools: [echo] });
    expect(stateless.copy()).toBe(stateless);
    const promptOnly = createToolSet({ name: "style", tools: [], prompt: "Be brief." });
    expect(promptOnly.tools()).toEqual([]);
    expect(promptOnly.prompt()).toBe("Be brief.");
  });

  it("gives each copy and each reset a fresh state bound to its own tools", async () => {
    const counter = createToolSet({
      name: "counter",
      initialState: () => ({ count: 0 }),
      iterationPromptInjection: (state) => (state.count === 0 ? "" : `count=${state.count}`),
      tools: (state) => [
        defineTool({
          name: "increment",
          description: "",
          parameters: z.object({}),
          execute: () => ++state.count,
        }),
      ],
    });
    const call = { id: "c", name: "increment", arguments: "" };
    const context = createTestToolContext();
    const first = counter.copy();
    const second = counter.copy();
    await first.invoke(call, context);
    await first.invoke(call, context);
    await second.invoke(call, context);
    expect([counter.state.count, first.state.count, second.state.count]).toEqual([0, 2, 1]);
    expect(first.iterationPromptInjection()).toBe("count=2");

    first.reset();
    expect(first.state.count).toBe(0);
    expect(first.iterationPromptInjection()).toBe("");
    await expect(first.invoke(call, context)).resolves.toBe("1");
    expect(second.state.count).toBe(1);
  });

  it("offers the tools of its latest build: a reset that builds other tools offers those", () => {
    let builds = 0;
    const versioned = createToolSet({
      name: "versioned",
      initialState: () => ({ build: ++builds }),
      tools: (state) => [
        defineTool({
          name: `tool_${state.build}`,
          description: "",
          parameters: z.object({}),
          execute: () => "",
        }),
      ],
    });
    expect(versioned.tools().map((tool) => tool.name)).toEqual(["tool_1"]);
    expect(versioned.tools()).toBe(versioned.tools());
    versioned.reset();
    expect(versioned.tools().map((tool) => tool.name)).toEqual(["tool_2"]);
    // The list is shared between callers: changing it in place fails instead of changing the set.
    expect(() => (versioned.tools() as unknown[]).push(echo.definition)).toThrow(TypeError);
  });

  it("refuses two tools with the same name", () => {
    expect(() => createToolSet({ name: "twice", tools: [echo, echo] })).toThrow(/defines tool "echo" twice/);
  });
});

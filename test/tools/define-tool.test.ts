import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/tools/define-tool.js";
import { ToolArgumentsError, ToolError } from "../../src/tools/tool-errors.js";
import { createTestToolContext } from "./tool-context.js";

const searchParameters = z.object({
  query: z.string().min(1).describe("What to look for."),
  limit: z.number().int().positive().default(10),
  tags: z.array(z.enum(["a", "b"])).optional(),
});

describe("defineTool", () => {
  it("publishes the input-side JSON Schema of its parameters without the dialect marker", () => {
    const tool = defineTool({
      name: "search",
      description: "Searches.",
      parameters: searchParameters,
      execute: () => "",
    });
    expect(tool.definition.name).toBe("search");
    expect(tool.definition.description).toBe("Searches.");
    expect(tool.definition.parameters).not.toHaveProperty("$schema");
    expect(tool.definition.parameters).toMatchObject({
      type: "object",
      properties: {
        query: { type: "string", minLength: 1, description: "What to look for." },
        limit: { type: "integer", default: 10 },
        tags: { type: "array", items: { type: "string", enum: ["a", "b"] } },
      },
      // A field with a default is optional for the model.
      required: ["query"],
    });
  });

  it("converts a schema once: tools defined again on the same schema (a stateful set's copy per session) share its JSON Schema", () => {
    const define = () =>
      defineTool({
        name: "search",
        description: "Searches.",
        parameters: searchParameters,
        execute: () => "",
      });
    const first = define();
    const second = define();
    expect(second.definition.parameters).toBe(first.definition.parameters);
    const other = defineTool({
      name: "search",
      description: "Searches.",
      parameters: z.object({ query: z.string() }),
      execute: () => "",
    });
    expect(other.definition.parameters).not.toBe(first.definition.parameters);
    expect(other.definition.parameters).toMatchObject({ required: ["query"] });
  });

  it("runs execute with the validated, defaulted arguments and the context", async () => {
    const seen: unknown[] = [];
    const context = createTestToolContext();
    const tool = defineTool({
      name: "search",
      description: "",
      parameters: searchParameters,
      execute: (args, ctx) => {
        seen.push(args, ctx);
        return `found ${args.query} (${args.limit})`;
      },
    });
    await expect(tool.invoke('{"query":"cats"}', context)).resolves.toBe("found cats (10)");
    expect(seen).toEqual([{ query: "cats", limit: 10 }, context]);
  });

  it("returns strings as they are and JSON for anything else", async () => {
    const make = (value: unknown) =>
      defineTool({ name: "t", description: "", parameters: z.object({}), execute: async () => value });
    const context = createTestToolContext();
    await expect(make('plain "text"').invoke("{}", context)).resolves.toBe('plain "text"');
    await expect(make({ a: [1, 2] }).invoke("{}", context)).resolves.toBe('{"a":[1,2]}');
    await expect(make(42).invoke("{}", context)).resolves.toBe("42");
    await expect(make(null).invoke("{}", context)).resolves.toBe("null");
    await expect(make(undefined).invoke("{}", context)).resolves.toBe("");
  });

  it("treats empty arguments as an empty object", async () => {
    const tool = defineTool({
      name: "now",
      description: "",
      parameters: z.object({}),
      execute: (args) => args,
    });
    await expect(tool.invoke("", createTestToolContext())).resolves.toBe("{}");
    await expect(tool.invoke("  \n", createTestToolContext())).resolves.toBe("{}");
  });

  it("rejects arguments that are not JSON with a ToolArgumentsError naming the tool", async () => {
    const tool = defineTool({
      name: "search",
      description: "",
      parameters: searchParameters,
      execute: () => "",
    });
    const error = await tool.invoke('{"query": "ca', createTestToolContext()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolArgumentsError);
    expect(error).toBeInstanceOf(ToolError);
    expect((error as ToolArgumentsError).name).toBe("ToolArgumentsError");
    expect((error as ToolArgumentsError).toolName).toBe("search");
    expect((error as Error).message).toMatch(/^arguments for tool "search" are not valid JSON: /);
  });

  it("lists every schema issue with its path, and never runs execute", async () => {
    let ran = false;
    const tool = defineTool({
      name: "search",
      description: "",
      parameters: searchParameters,
      execute: () => {
        ran = true;
        return "";
      },
    });
    const error = (await tool
      .invoke('{"query":"","limit":-1,"tags":["a","c"]}', createTestToolContext())
      .catch((e: unknown) => e)) as ToolArgumentsError;
    expect(error).toBeInstanceOf(ToolArgumentsError);
    expect(ran).toBe(false);
    expect(error.issues).toHaveLength(3);
    expect(error.issues[0]).toMatch(/^query: /);
    expect(error.issues[1]).toMatch(/^limit: /);
    expect(error.issues[2]).toMatch(/^tags\[1\]: /);
    expect(error.message).toBe(`invalid arguments for tool "search": ${error.issues.join("; ")}`);
  });

  it("reports a missing or mistyped root as an issue without a path", async () => {
    const tool = defineTool({
      name: "search",
      description: "",
      parameters: searchParameters,
      execute: () => "",
    });
    const error = (await tool
      .invoke("[1]", createTestToolContext())
      .catch((e: unknown) => e)) as ToolArgumentsError;
    expect(error.issues).toHaveLength(1);
    expect(error.issues[0]).toBe("Invalid input: expected object, received array");
  });

  it("needsApproval: never by default, always with true, or as the predicate decides on the parsed arguments", () => {
    const base = { description: "Searches.", parameters: searchParameters, execute: () => "" };
    expect(defineTool({ name: "plain", ...base }).needsApproval('{"query":"x"}')).toBe(false);
    expect(defineTool({ name: "always", ...base, needsApproval: true }).needsApproval("")).toBe(true);
    const picky = defineTool({
      name: "picky",
      ...base,
      // Sees the defaulted arguments.
      needsApproval: (args) => args.limit > 50,
    });
    expect(picky.needsApproval('{"query":"x"}')).toBe(false);
    expect(picky.needsApproval('{"query":"x","limit":100}')).toBe(true);
    // Arguments that will fail anyway need no approval; a throwing predicate asks rather than runs.
    expect(picky.needsApproval("not json")).toBe(false);
    expect(picky.needsApproval('{"query":""}')).toBe(false);
    const throwing = defineTool({
      name: "throwing",
      ...base,
      needsApproval: () => {
        throw new Error("oops");
      },
    });
    expect(throwing.needsApproval('{"query":"x"}')).toBe(true);
  });

  it("refuses invalid definitions at once", () => {
    expect(() =>
      defineTool({ name: "has space", description: "", parameters: z.object({}), execute: () => "" }),
    ).toThrow(TypeError);
    expect(() =>
      defineTool({ name: "x".repeat(65), description: "", parameters: z.object({}), execute: () => "" }),
    ).toThrow(TypeError);
    expect(() =>
      defineTool({ name: "s", description: "", parameters: z.string(), execute: () => "" }),
    ).toThrow(/must be an object schema/);
    expect(() =>
      defineTool({ name: "d", description: "", parameters: z.object({ at: z.date() }), execute: () => "" }),
    ).toThrow(/cannot be expressed as JSON Schema/);
  });
});

import { z } from "zod";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool, type Tool } from "../../src/tools/define-tool.js";
import type { ToolSet } from "../../src/tools/tool-set.js";

/** The tool every loop under test calls: validates its arguments with zod and answers at once. */
export const benchTool: Tool = defineTool({
  name: "lookup",
  description: "Looks a key up.",
  parameters: z.object({ key: z.string() }),
  execute: ({ key }) => `value of ${key}`,
});

/** What the model passes to {@link benchTool}. */
export const BENCH_TOOL_ARGUMENTS = JSON.stringify({ key: "alpha" });

/** {@link benchTool} as the ToolSet agentloop's agents get. */
export const benchToolSet: ToolSet = createToolSet({ name: "bench", tools: [benchTool] });

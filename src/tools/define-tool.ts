import { z } from "zod";
import { describeError } from "../errors/describe-error.js";
import type { ToolDefinition } from "../llm/types.js";
import { ToolArgumentsError, ToolError } from "./tool-errors.js";
import type { ToolContext } from "./tool-set.js";

/** Tool names every provider accepts (OpenAI and Anthropic both cap at 64 of these characters). */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** A tool built by {@link defineTool}: its definition for the model and a string-in, string-out runner. */
export interface Tool {
  readonly definition: ToolDefinition;
  /**
   * Parses and validates the model's raw JSON arguments, runs the tool and returns its result text.
   * Throws {@link ToolArgumentsError} for bad arguments; whatever `execute` throws passes through.
   */
  invoke(argumentsJson: string, context: ToolContext): Promise<string>;
  /**
   * Whether a call with these raw JSON arguments must be approved before it runs. Arguments that
   * do not parse or validate need no approval: the call fails without running anyway.
   */
  needsApproval(argumentsJson: string): boolean;
  /** Whether some call may need approval (`needsApproval` is not `false`). */
  readonly mayNeedApproval?: boolean;
  /** Running it twice has the effect of running it once: it is run again after a host stopped mid-call. */
  readonly idempotent: boolean;
}

/** What {@link defineTool} takes. */
export interface DefineToolParams<Schema extends z.ZodType> {
  /** What the model calls it: 1–64 letters, digits, `_` or `-`, unique within the agent. */
  name: string;
  /** Tells the model when and how to use the tool. */
  description: string;
  /** An object schema; its JSON Schema (input side) is what the model sees. */
  parameters: Schema;
  /** Runs with validated arguments. A string result is returned as is, anything else as JSON. */
  execute(args: z.output<Schema>, context: ToolContext): unknown;
  /**
   * A person must approve each call before it runs (`true`), or the calls whose parsed arguments
   * the function picks. The approval is asked on the session's control subject.
   * @defaultValue false
   */
  needsApproval?: boolean | ((args: z.output<Schema>) => boolean);
  /**
   * Running a call twice has the effect of running it once (a read, a lookup, setting a value).
   * When the host stops while a call runs, an idempotent tool's call is run again on resume; any
   * other's gets `{"error":"interrupted",…}` and the model decides.
   * @defaultValue false
   */
  idempotent?: boolean;
}

/**
 * Defines a tool the model may call: its name and description, its parameters as a zod object
 * schema (the model sees its JSON Schema), and `execute`, which gets the validated arguments.
 * Arguments that do not validate never reach `execute`: the model gets an `{"error": …}` result
 * saying why, and may try again; so does a tool that throws. Put tools in an agent with
 * {@link createToolSet}, or list them in a config file's `tools`.
 *
 * @param params The tool's name, description, parameters schema and `execute`, and whether its calls
 *   need approval or may be repeated.
 * @returns A tool: its definition for the model and a runner from raw JSON arguments to result text.
 * @throws TypeError at once for a bad name or a schema that is not an object or has no JSON Schema:
 *   those are the developer's mistakes, not the model's.
 *
 * @example
 * ```ts
 * import { defineTool, z } from "agentloop";
 *
 * export const orderStatus = defineTool({
 *   name: "order_status",
 *   description: "Looks up an order's status by its id.",
 *   parameters: z.object({ orderId: z.string().describe("The order's id, e.g. A-1042") }),
 *   // A string is returned as is; anything else reaches the model as JSON.
 *   execute: async ({ orderId }, { signal }) => {
 *     const response = await fetch(`https://orders.example.com/${orderId}`, { signal });
 *     return response.ok ? await response.json() : { error: `no order ${orderId}` };
 *   },
 *   idempotent: true,
 * });
 *
 * export const refund = defineTool({
 *   name: "refund",
 *   description: "Refunds an order.",
 *   parameters: z.object({ orderId: z.string(), amount: z.number().positive() }),
 *   execute: ({ orderId, amount }) => `refunded ${amount} on ${orderId}`,
 *   // A person approves refunds over 100 before they run.
 *   needsApproval: ({ amount }) => amount > 100,
 * });
 * ```
 */
export function defineTool<Schema extends z.ZodType>(params: DefineToolParams<Schema>): Tool {
  const { name, description, parameters, execute, needsApproval = false, idempotent = false } = params;
  if (!TOOL_NAME.test(name)) {
    throw new TypeError(`invalid tool name ${JSON.stringify(name)}: use 1-64 letters, digits, "_" or "-"`);
  }
  const definition: ToolDefinition = {
    name,
    description,
    parameters: toParametersSchema(name, parameters),
  };

  return {
    definition,
    idempotent,
    async invoke(argumentsJson, context) {
      const raw = parseArgumentsJson(name, argumentsJson);
      const parsed = await parameters.safeParseAsync(raw);
      if (!parsed.success) {
        const issues = parsed.error.issues.map(formatIssue);
        throw new ToolArgumentsError(`invalid arguments for tool "${name}": ${issues.join("; ")}`, {
          toolName: name,
          issues,
          cause: parsed.error,
        });
      }
      return stringifyResult(name, await execute(parsed.data, context));
    },
    mayNeedApproval: needsApproval !== false,
    needsApproval(argumentsJson) {
      if (typeof needsApproval === "boolean") return needsApproval;
      let raw: unknown;
      try {
        raw = parseArgumentsJson(name, argumentsJson);
      } catch {
        return false;
      }
      try {
        const parsed = parameters.safeParse(raw);
        return parsed.success && needsApproval(parsed.data) === true;
      } catch {
        // An async schema, or a predicate that throws: ask rather than run unchecked.
        return true;
      }
    },
  };
}

/**
 * Each schema's JSON Schema, converted once: stateful ToolSets define their tools again for every
 * session (each `copy()`), and a converted schema is a tree of a dozen objects and strings, kept per
 * live session and rebuilt at a cost in CPU. The trees are only read (by the provider adapters).
 */
const PARAMETER_SCHEMAS = new WeakMap<z.ZodType, Record<string, unknown>>();

function toParametersSchema(toolName: string, schema: z.ZodType): Record<string, unknown> {
  const known = PARAMETER_SCHEMAS.get(schema);
  if (known !== undefined) return known;
  const converted = convertParametersSchema(toolName, schema);
  PARAMETER_SCHEMAS.set(schema, converted);
  return converted;
}

function convertParametersSchema(toolName: string, schema: z.ZodType): Record<string, unknown> {
  let jsonSchema: Record<string, unknown>;
  try {
    // "input" describes what the model must send (defaults optional), not what execute receives.
    jsonSchema = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  } catch (error) {
    throw new TypeError(`tool "${toolName}": parameters cannot be expressed as JSON Schema`, {
      cause: error,
    });
  }
  // Providers want a bare object schema; the dialect marker only adds noise to every request.
  const { $schema: _dialect, ...rest } = jsonSchema;
  if (rest.type !== "object") {
    throw new TypeError(`tool "${toolName}": parameters must be an object schema (z.object({...}))`);
  }
  return rest;
}

function parseArgumentsJson(toolName: string, argumentsJson: string): unknown {
  // Some providers send "" for a call without arguments.
  if (argumentsJson.trim() === "") return {};
  try {
    return JSON.parse(argumentsJson);
  } catch (error) {
    const reason = describeError(error);
    throw new ToolArgumentsError(`arguments for tool "${toolName}" are not valid JSON: ${reason}`, {
      toolName,
      cause: error,
    });
  }
}

/** `plan[0].status: Invalid option: …` — a path the model can map back to its arguments. */
function formatIssue(issue: z.core.$ZodIssue): string {
  const path = issue.path.reduce<string>((text, key) => {
    if (typeof key === "number") return `${text}[${key}]`;
    const segment = String(key);
    return text === "" ? segment : `${text}.${segment}`;
  }, "");
  return path === "" ? issue.message : `${path}: ${issue.message}`;
}

function stringifyResult(toolName: string, result: unknown): string {
  if (typeof result === "string") return result;
  if (result === undefined) return "";
  try {
    return JSON.stringify(result) ?? "";
  } catch (error) {
    throw new ToolError(`tool "${toolName}" returned a result that cannot be serialised`, {
      toolName,
      cause: error,
    });
  }
}

import { z } from "zod";
import { InternalError } from "../../errors/internal-error.js";
import type { ToolCall, ToolDefinition } from "../../llm/types.js";
import type { StatefulToolSet } from "../create-tool-set.js";
import { defineTool } from "../define-tool.js";
import { ToolNotFoundError } from "../tool-errors.js";
import type { ToolContext } from "../tool-set.js";

export const TodoStatus = z.enum(["pending", "in_progress", "completed"]);
export type TodoStatus = z.infer<typeof TodoStatus>;

export const TodoItem = z.object({
  step: z.string().min(1).describe("What to do, in a short sentence."),
  status: TodoStatus.describe("pending, in_progress (at most one step at a time) or completed."),
});
export type TodoItem = z.infer<typeof TodoItem>;

export const TodoListArguments = z.object({
  plan: z.array(TodoItem).describe("The whole plan, in order. It replaces the previous plan."),
  explanation: z.string().optional().describe("Why the plan changed, if it did."),
});
export type TodoListArguments = z.infer<typeof TodoListArguments>;

/** One session's plan. */
export interface TodoListState {
  plan: TodoItem[];
}

/** The built-in `todo_list` set: the tool, the planning prompt and the plan reminder. */
export type TodoListToolSet = StatefulToolSet<TodoListState>;

export const TODO_LIST_PROMPT = [
  "## Planning with todo_list",
  "For work that takes several steps, call the `todo_list` tool with your plan before you start:",
  "each step a short sentence, all of them `pending`. Mark a step `in_progress` when you begin it",
  "(one at a time) and `completed` when it is done, and call `todo_list` again whenever the plan",
  "changes. Every call replaces the whole plan. Skip it for simple questions answered in one step.",
].join("\n");

const TODO_LIST_DESCRIPTION =
  "Records your plan for a multi-step task and the status of each step. Send the whole plan " +
  "every time: it replaces the previous one. Send an empty plan to clear it.";

/** The plan each running call writes to: its session's state, by the call's own context object. */
const PLAN_OF_CALL = new WeakMap<ToolContext, TodoListState>();

/**
 * The one `todo_list` tool of every session: its definition, schema and runner are the same for
 * all, so they are built once; a call finds its session's plan through its context (a new object
 * per call). Defined per session, each idle session held its own tool, definition and closures.
 */
const TODO_LIST_TOOL = defineTool({
  name: "todo_list",
  // Sends the whole plan each time: setting it twice is setting it once.
  idempotent: true,
  description: TODO_LIST_DESCRIPTION,
  parameters: TodoListArguments,
  execute: (args, context) => {
    const state = PLAN_OF_CALL.get(context);
    if (state === undefined) throw new InternalError("todo_list was called outside its tool set");
    state.plan = args.plan.map((item) => ({ step: item.step, status: item.status }));
    if (state.plan.length === 0) return "Plan cleared.";
    return `Plan updated (${summarise(state.plan)}).\n${renderPlan(state.plan)}`;
  },
});

/** One session's `todo_list` set: its plan is all it holds; the tool is shared. */
class TodoListSet implements TodoListToolSet {
  #state: TodoListState = { plan: [] };

  get name(): string {
    return "todo_list";
  }

  get state(): TodoListState {
    return this.#state;
  }

  tools(): ToolDefinition[] {
    return [TODO_LIST_TOOL.definition];
  }

  async invoke(call: ToolCall, context: ToolContext): Promise<string> {
    if (call.name !== TODO_LIST_TOOL.definition.name) throw new ToolNotFoundError(call.name);
    PLAN_OF_CALL.set(context, this.#state);
    return TODO_LIST_TOOL.invoke(call.arguments, context);
  }

  needsApproval(): boolean {
    return false;
  }

  isIdempotent(call: ToolCall): boolean {
    return call.name === TODO_LIST_TOOL.definition.name;
  }

  approvalTools(): string[] {
    return [];
  }

  prompt(): string {
    return TODO_LIST_PROMPT;
  }

  iterationPromptInjection(): string {
    return renderTodoListReminder(this.#state.plan);
  }

  copy(): TodoListToolSet {
    return new TodoListSet();
  }

  reset(): void {
    this.#state = { plan: [] };
  }
}

/**
 * The built-in `todo_list` ToolSet. Each `copy()` is an independent session plan;
 * `reset()` clears it. Its iteration injection reminds the model of the current plan.
 */
export function createTodoListToolSet(): TodoListToolSet {
  return new TodoListSet();
}

/**
 * The `<TODO_LIST_REMINDER>` block prepended to each user message, or "" for an empty plan. It
 * says plainly that it is a snapshot, so the model does not take the steps as a new request.
 */
export function renderTodoListReminder(plan: readonly TodoItem[]): string {
  if (plan.length === 0) return "";
  return [
    "<TODO_LIST_REMINDER>",
    "This is your current plan, as you last recorded it with the todo_list tool. It is a reminder of",
    "where you are, not a new instruction: follow the user's message below, and update the plan",
    "with todo_list when it changes.",
    escapeXml(renderPlan(plan)),
    "</TODO_LIST_REMINDER>",
  ].join("\n");
}

const STATUS_MARK: Record<TodoStatus, string> = {
  pending: "[ ]",
  in_progress: "[~]",
  completed: "[x]",
};

function renderPlan(plan: readonly TodoItem[]): string {
  return plan
    .map((item, index) => `${index + 1}. ${STATUS_MARK[item.status]} ${item.step} (${item.status})`)
    .join("\n");
}

function summarise(plan: readonly TodoItem[]): string {
  const count = (status: TodoStatus) => plan.filter((item) => item.status === status).length;
  const steps = plan.length === 1 ? "1 step" : `${plan.length} steps`;
  return `${steps}: ${count("completed")} completed, ${count("in_progress")} in progress, ${count("pending")} pending`;
}

/** Steps are the model's own text: escaping keeps them from closing the reminder block early. */
function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

import type { ToolCall, ToolDefinition } from "../llm/types.js";
import type { Tool } from "./define-tool.js";
import { ToolNotFoundError } from "./tool-errors.js";
import type { ToolContext, ToolSet } from "./tool-set.js";

/**
 * How to build a ToolSet. A stateless set passes `tools` as an array. A stateful set passes
 * `initialState` and builds its tools from the state object: every instance (the template, each
 * `copy()`, and each `reset()`) gets a fresh state and tools bound to it, so sessions never share
 * state and no tool has to know about copying.
 */
export interface CreateToolSetParams<State = undefined> {
  /** The set's name (logs and errors name it). */
  name: string;
  /** The tools, or a builder binding them to one instance's state. */
  tools: readonly Tool[] | ((state: State) => readonly Tool[]);
  /** Static text appended to the system prompt once, when the agent is built. @defaultValue none */
  prompt?: string;
  /** Dynamic text prepended to each user message; "" adds nothing. @defaultValue none */
  iterationPromptInjection?: (state: State) => string;
  /** Creates a fresh session state; present for stateful sets. @defaultValue none: the set is stateless */
  initialState?: () => State;
}

/** A ToolSet built by {@link createToolSet}; `state` is this instance's session state. */
export interface StatefulToolSet<State> extends ToolSet {
  readonly state: State;
  isIdempotent(call: ToolCall): boolean;
  copy(): StatefulToolSet<State>;
}

/**
 * Groups tools into a ToolSet, the unit an agent takes (`createAgent({ toolSets })`). A set may
 * carry a prompt for the system prompt and per-session state: give `initialState` and build the
 * tools from the state, and every session (each `copy()`, each `/new`) gets a fresh state of its own.
 *
 * @param params The set's name and tools, and optionally its prompt and session state.
 * @returns The set; `state` is this instance's session state.
 * @throws TypeError when two tools share a name.
 *
 * @example
 * ```ts
 * import { createToolSet, defineTool, z } from "agentloop";
 *
 * // A notepad per session: each session's tools write to its own list.
 * const notes = createToolSet({
 *   name: "notes",
 *   prompt: "Write down what the user asks you to remember.",
 *   initialState: () => ({ lines: [] as string[] }),
 *   tools: (state) => [
 *     defineTool({
 *       name: "note",
 *       description: "Remembers one line.",
 *       parameters: z.object({ line: z.string() }),
 *       execute: ({ line }) => {
 *         state.lines.push(line);
 *         return `noted (${state.lines.length} lines)`;
 *       },
 *     }),
 *   ],
 *   iterationPromptInjection: (state) => (state.lines.length === 0 ? "" : `Notes so far:\n${state.lines.join("\n")}`),
 * });
 * ```
 */
export function createToolSet<State = undefined>(params: CreateToolSetParams<State>): StatefulToolSet<State> {
  return new ComposedToolSet(params);
}

class ComposedToolSet<State> implements StatefulToolSet<State> {
  readonly name: string;
  #state!: State;
  #tools = new Map<string, Tool>();
  /** The definitions of `#tools`, listed at the first ask after they were built (every call reads them). */
  #definitions: readonly ToolDefinition[] | undefined;

  constructor(private readonly params: CreateToolSetParams<State>) {
    this.name = params.name;
    this.#instantiate();
  }

  get state(): State {
    return this.#state;
  }

  /** The same frozen list until the tools are built again (`reset`): read, never changed, by its callers. */
  tools(): readonly ToolDefinition[] {
    this.#definitions ??= Object.freeze([...this.#tools.values()].map((tool) => tool.definition));
    return this.#definitions;
  }

  invoke(call: ToolCall, context: ToolContext): Promise<string> {
    const tool = this.#tools.get(call.name);
    if (tool === undefined) return Promise.reject(new ToolNotFoundError(call.name));
    return tool.invoke(call.arguments, context);
  }

  needsApproval(call: ToolCall): boolean {
    return this.#tools.get(call.name)?.needsApproval(call.arguments) ?? false;
  }

  isIdempotent(call: ToolCall): boolean {
    return this.#tools.get(call.name)?.idempotent ?? false;
  }

  approvalTools(): string[] {
    return [...this.#tools.values()]
      .filter((tool) => tool.mayNeedApproval === true)
      .map((tool) => tool.definition.name);
  }

  prompt(): string {
    return this.params.prompt ?? "";
  }

  iterationPromptInjection(): string {
    return this.params.iterationPromptInjection?.(this.#state) ?? "";
  }

  copy(): StatefulToolSet<State> {
    // A stateless set has nothing to isolate: sharing it is cheaper and equivalent.
    return this.params.initialState === undefined ? this : new ComposedToolSet(this.params);
  }

  reset(): void {
    if (this.params.initialState !== undefined) this.#instantiate();
  }

  #instantiate(): void {
    const { initialState, tools } = this.params;
    const state = initialState === undefined ? (undefined as State) : initialState();
    const list = typeof tools === "function" ? tools(state) : tools;
    const byName = new Map<string, Tool>();
    for (const tool of list) {
      const toolName = tool.definition.name;
      if (byName.has(toolName)) {
        throw new TypeError(`tool set "${this.params.name}" defines tool "${toolName}" twice`);
      }
      byName.set(toolName, tool);
    }
    this.#state = state;
    this.#tools = byName;
    this.#definitions = undefined;
  }
}

import type { Bus } from "../../bus/bus.js";
import { ConfigurationError } from "../../errors/configuration-error.js";
import type { SupervisionPolicy } from "../ask-agent.js";
import type { ToolSet } from "../tool-set.js";
import { createCurrentTimeToolSet } from "./current-time.js";
import { createTodoListToolSet } from "./todo-list.js";

/** What a factory may need to build a set for one agent; factories ignore what they don't use. */
export interface ToolSetFactoryContext {
  /** The agent the set is built for (ask_agent refuses to call it). */
  agent?: string;
  bus?: Bus;
  now?: () => Date;
  /** Environment variables the agent's shell commands may see (its agents-file `shellEnv`). */
  shellEnv?: readonly string[];
  /** What `ask_agent` does when the asked agent fails (its agents-file `onChildFailure`). */
  supervision?: SupervisionPolicy;
}

/** Builds a fresh ToolSet (the agent's template; sessions `copy()` it). */
export type ToolSetFactory = (context: ToolSetFactoryContext) => ToolSet;

/** An agent file or flag named a ToolSet nobody registered. */
export class UnknownToolSetError extends ConfigurationError {
  readonly toolSetName: string;

  constructor(toolSetName: string, known: readonly string[]) {
    super(`unknown tool set "${toolSetName}" (known: ${known.join(", ") || "none"})`);
    this.toolSetName = toolSetName;
  }
}

/** Named ToolSet factories: the names agent files use in `"tools": [...]`. */
export class ToolSetRegistry {
  readonly #factories = new Map<string, ToolSetFactory>();

  /** Adds or replaces the factory for `name`. */
  register(name: string, factory: ToolSetFactory): this {
    this.#factories.set(name, factory);
    return this;
  }

  has(name: string): boolean {
    return this.#factories.has(name);
  }

  /** Registered names, in registration order. */
  names(): string[] {
    return [...this.#factories.keys()];
  }

  /** One new set per name, in the order given. An unknown name throws {@link UnknownToolSetError}. */
  create(names: readonly string[], context: ToolSetFactoryContext = {}): ToolSet[] {
    return names.map((name) => {
      const factory = this.#factories.get(name);
      if (factory === undefined) throw new UnknownToolSetError(name, this.names());
      return factory(context);
    });
  }
}

/** A registry holding the built-in sets that need nothing but a clock. */
export function createBuiltinToolSetRegistry(): ToolSetRegistry {
  return new ToolSetRegistry()
    .register("todo_list", () => createTodoListToolSet())
    .register("current_time", (context) =>
      createCurrentTimeToolSet(context.now === undefined ? {} : { now: context.now }),
    );
}

/** The process-wide registry used when none is passed; others add sets (ask_agent) to it. */
export const defaultToolSetRegistry: ToolSetRegistry = createBuiltinToolSetRegistry();

/** Registers a factory in {@link defaultToolSetRegistry}. */
export function registerToolSetFactory(name: string, factory: ToolSetFactory): void {
  defaultToolSetRegistry.register(name, factory);
}

/**
 * The ToolSets named in an agent definition, e.g. `builtinToolSets(["todo_list", "current_time"])`.
 * Pass a registry to use sets registered elsewhere; an unknown name throws {@link UnknownToolSetError}.
 */
export function builtinToolSets(
  names: readonly string[],
  options: { registry?: ToolSetRegistry; context?: ToolSetFactoryContext } = {},
): ToolSet[] {
  return (options.registry ?? defaultToolSetRegistry).create(names, options.context);
}

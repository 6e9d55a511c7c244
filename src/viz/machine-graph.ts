import type { AnyStateMachine, AnyStateNode, AnyTransitionDefinition } from "xstate";

/**
 * A plain, serialisable picture of an XState v5 machine: its state tree and every transition with
 * a human label. The three renderers (mermaid, JSON, SVG) draw from this model only, so they agree
 * on names and ids, and none of them touches XState internals.
 *
 * State ids are `<machine>.<path>` (e.g. `chat.iterating.finalTurn`, the root is `chat`): the same
 * ids the UI computes from a `StateChanged` state value to highlight the active states.
 */

export type GraphStateType = "atomic" | "compound" | "parallel" | "final" | "history";

/** An actor the state invokes while it is active. */
export interface GraphInvoke {
  /** The invoke id (XState generates one when the machine gives none). */
  id: string;
  /** The actor's name in `setup({ actors })`, or the id for inline logic. */
  src: string;
}

export interface GraphState {
  /** `<machine>.<path>`; the root's id is the machine name. */
  id: string;
  /** The state's own key (the machine name for the root). */
  key: string;
  path: string[];
  type: GraphStateType;
  /** Id of the initial child (compound states). */
  initial?: string;
  invokes: GraphInvoke[];
  children: GraphState[];
  description?: string;
}

export type GraphTransitionKind =
  | "event"
  | "always"
  | "after"
  | "actorDone"
  | "actorError"
  | "actorSnapshot"
  | "stateDone";

export interface GraphTransition {
  /** `<source id>#<n>`: unique within the graph, stable for a given machine definition. */
  id: string;
  source: string;
  /** Target state ids; empty for a targetless transition (actions only). */
  targets: string[];
  /** XState's event descriptor (`""` for `always`). */
  eventType: string;
  kind: GraphTransitionKind;
  /** What a reader sees on the arrow: `"GO"`, `"done: callModel"`, `"always [hasTools]"`, … */
  label: string;
  guard?: string;
  /** `after` delay: a number of milliseconds or a named delay. */
  delay?: string;
  /** The invoked actor a done / error / snapshot transition listens to. */
  actor?: string;
  reenter: boolean;
}

export interface MachineGraph {
  /** The name used as the id prefix (`chat`, `iteration`, …). */
  name: string;
  /** XState's own machine id. */
  machineId: string;
  root: GraphState;
  /** Every transition, in document order (state by state, depth first). */
  transitions: GraphTransition[];
}

export interface MachineGraphOptions {
  /** Id prefix; defaults to the machine's id (or `machine` when it has none). */
  name?: string;
}

const DONE_ACTOR = "xstate.done.actor.";
const ERROR_ACTOR = "xstate.error.actor.";
const SNAPSHOT_ACTOR = "xstate.snapshot.";
const DONE_STATE = "xstate.done.state.";
const AFTER = "xstate.after.";

/** Builds the graph model of `machine` from its root state node. */
export function machineGraph(machine: AnyStateMachine, options: MachineGraphOptions = {}): MachineGraph {
  const name = options.name ?? defaultName(machine.id);
  const ids = new Map<AnyStateNode, string>();
  const actorNames = new Map<string, string>();

  const visit = (node: AnyStateNode): GraphState => {
    const id = node.path.length === 0 ? name : `${name}.${node.path.join(".")}`;
    ids.set(node, id);
    const invokes = node.invoke.map((definition) => {
      const src = typeof definition.src === "string" ? definition.src : definition.id;
      actorNames.set(definition.id, src);
      return { id: definition.id, src };
    });
    const children = Object.values(node.states as Record<string, AnyStateNode>).map(visit);
    const state: GraphState = {
      id,
      key: node.path.length === 0 ? name : node.key,
      path: [...node.path],
      type: node.type,
      invokes,
      children,
    };
    if (node.type === "compound") {
      const initial = node.initial?.target?.[0];
      if (initial) state.initial = `${name}.${initial.path.join(".")}`;
    }
    if (node.description) state.description = node.description;
    return state;
  };
  const root = visit(machine.root);

  const transitions: GraphTransition[] = [];
  const collect = (node: AnyStateNode): void => {
    const source = ids.get(node)!;
    let index = 0;
    const add = (definition: AnyTransitionDefinition & { delay?: unknown }, eventType: string): void => {
      const targets = (definition.target ?? []).map((target) => ids.get(target) ?? target.id);
      const guard = describeGuard(definition.guard);
      const described = describeEvent(eventType, actorNames, definition.delay);
      const transition: GraphTransition = {
        id: `${source}#${index++}`,
        source,
        targets,
        eventType,
        kind: described.kind,
        label: guard === undefined ? described.label : `${described.label} [${guard}]`,
        reenter: definition.reenter === true,
      };
      if (guard !== undefined) transition.guard = guard;
      if (described.delay !== undefined) transition.delay = described.delay;
      if (described.actor !== undefined) transition.actor = described.actor;
      transitions.push(transition);
    };
    for (const [eventType, definitions] of node.transitions) {
      for (const definition of definitions) add(definition, eventType);
    }
    for (const definition of node.always ?? []) add(definition, "");
    for (const child of Object.values(node.states as Record<string, AnyStateNode>)) collect(child);
  };
  collect(machine.root);

  return { name, machineId: machine.id, root, transitions };
}

/** Every state of the graph, parents before children (document order). */
export function allStates(graph: MachineGraph): GraphState[] {
  const states: GraphState[] = [];
  const walk = (state: GraphState): void => {
    states.push(state);
    state.children.forEach(walk);
  };
  walk(graph.root);
  return states;
}

function defaultName(machineId: string): string {
  // XState names an id-less machine "(machine)", which is not a usable id prefix.
  return machineId && machineId !== "(machine)" ? machineId : "machine";
}

interface DescribedEvent {
  kind: GraphTransitionKind;
  label: string;
  delay?: string;
  actor?: string;
}

function describeEvent(eventType: string, actorNames: Map<string, string>, delay: unknown): DescribedEvent {
  if (eventType === "") return { kind: "always", label: "always" };
  if (eventType.startsWith(DONE_ACTOR)) {
    const actor = actorLabel(eventType.slice(DONE_ACTOR.length), actorNames);
    return { kind: "actorDone", label: `done: ${actor}`, actor };
  }
  if (eventType.startsWith(ERROR_ACTOR)) {
    const actor = actorLabel(eventType.slice(ERROR_ACTOR.length), actorNames);
    return { kind: "actorError", label: "error", actor };
  }
  if (eventType.startsWith(SNAPSHOT_ACTOR)) {
    const actor = actorLabel(eventType.slice(SNAPSHOT_ACTOR.length), actorNames);
    return { kind: "actorSnapshot", label: `snapshot: ${actor}`, actor };
  }
  if (eventType.startsWith(DONE_STATE)) return { kind: "stateDone", label: "done" };
  if (eventType.startsWith(AFTER)) {
    const value = delay === undefined ? eventType.slice(AFTER.length).split(".")[0]! : String(delay);
    const shown = /^\d+$/.test(value) ? `${value}ms` : value;
    return { kind: "after", label: `after ${shown}`, delay: value };
  }
  return { kind: "event", label: eventType };
}

function actorLabel(invokeId: string, actorNames: Map<string, string>): string {
  return actorNames.get(invokeId) ?? invokeId;
}

/**
 * A readable guard expression. Named guards keep their names; `and` / `or` / `not` combinators
 * (functions carrying `guards`) are spelled out; an inline function shows its name.
 */
export function describeGuard(guard: unknown): string | undefined {
  if (guard === undefined || guard === null) return undefined;
  if (typeof guard === "string") return guard;
  if (typeof guard === "object" && "type" in guard && typeof guard.type === "string") return guard.type;
  if (typeof guard === "function") {
    const parts = (guard as { guards?: unknown }).guards;
    if (Array.isArray(parts)) {
      const operator = combinatorOf(guard as GuardFunction);
      const inner = parts.map((part) => describeGuard(part) ?? "guard");
      if (operator === "not") return inner.length === 1 ? `!${wrap(inner[0]!)}` : `!(${inner.join(" && ")})`;
      if (operator === "or") return inner.map(wrap).join(" || ");
      return inner.map(wrap).join(" && ");
    }
    return guard.name && guard.name !== "anonymous" ? guard.name : "guard";
  }
  return "guard";
}

type GuardFunction = { name: string; check?: { name: string } };

function combinatorOf(guard: GuardFunction): "and" | "or" | "not" {
  const names = `${guard.name} ${guard.check?.name ?? ""}`.toLowerCase();
  if (/\bnot\b|checknot/.test(names)) return "not";
  if (/\bor\b|checkor/.test(names)) return "or";
  return "and";
}

function wrap(expression: string): string {
  return /[ &|]/.test(expression) ? `(${expression})` : expression;
}

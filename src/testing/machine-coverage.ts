import {
  type AnyStateMachine,
  type AnyStateNode,
  type AnyTransitionDefinition,
  getInitialSnapshot,
  type InspectionEvent,
} from "xstate";
import { getAdjacencyMap, getPathsFromEvents, getShortestPaths, getSimplePaths } from "xstate/graph";

/**
 * Model-based testing helpers for the statecharts: plan paths over a machine with
 * `xstate/graph`, and measure which state nodes and transitions of the definition a replay on the
 * real machine actually took.
 *
 * Coverage is recorded from the XState inspection API (`@xstate.microstep` carries the transitions
 * taken), so it counts what the real actor did, not what the traversal predicted. Identities are
 * built from state-node ids and positions, so they survive `.provide()` (which rebuilds the nodes).
 */

/**
 * A transition's identity: its source state, its event descriptor ("always" for an eventless
 * transition) and its position among the source's transitions for that descriptor (guarded
 * alternatives are distinct transitions).
 */
export function transitionKey(transition: AnyTransitionDefinition): string {
  const { source } = transition;
  const descriptor = transition.eventType as string | null | undefined;
  const siblings: readonly AnyTransitionDefinition[] =
    descriptor === null || descriptor === undefined || descriptor === ""
      ? (source.always ?? [])
      : (source.transitions.get(descriptor) ?? []);
  const position = siblings.indexOf(transition);
  if (position < 0) throw new Error(`transition ${source.id} --${descriptor}--> not found in its source`);
  return `${source.id} --${descriptor || "always"}--> #${position}`;
}

function walk(node: AnyStateNode, visit: (node: AnyStateNode) => void): void {
  visit(node);
  for (const child of Object.values(node.states)) walk(child as AnyStateNode, visit);
}

/** Every state node id of the machine, the root included (e.g. "chat", "chat.iterating.finalTurn"). */
export function definedStates(machine: AnyStateMachine): string[] {
  const ids: string[] = [];
  walk(machine.root, (node) => ids.push(node.id));
  return ids;
}

/** Every transition of the machine: `on`, invoke `onDone`/`onError`, delayed and eventless ones. */
export function definedTransitions(machine: AnyStateMachine): string[] {
  const keys: string[] = [];
  walk(machine.root, (node) => {
    for (const transitions of node.transitions.values()) {
      for (const transition of transitions) keys.push(transitionKey(transition));
    }
    for (const transition of node.always ?? []) keys.push(transitionKey(transition));
  });
  return keys;
}

/** Coverage of one kind (states or transitions) of one machine. */
export interface CoverageFigures {
  total: number;
  visited: number;
  /** What the definition has and the replays never took, in definition order. */
  missing: string[];
  /** visited / total, 0..1. */
  ratio: number;
}

/** Coverage of one machine's states and transitions. */
export interface CoverageReport {
  states: CoverageFigures;
  transitions: CoverageFigures;
}

/** A coverage recorder for one machine definition (see {@link createMachineCoverage}). */
export interface MachineCoverage {
  /**
   * An inspector for `createActor(…, { inspect })`. It records the microsteps of every actor
   * running this machine (matched by machine id, so `.provide()`d copies and invoked children
   * count) and ignores the rest.
   */
  inspect(inspection: InspectionEvent): void;
  /** Records the state nodes of a snapshot (e.g. an actor's initial state, before any microstep). */
  recordSnapshot(snapshot: unknown): void;
  report(): CoverageReport;
}

interface SnapshotWithNodes {
  _nodes?: readonly AnyStateNode[];
}

/** Starts recording coverage of `machine`'s definition. */
export function createMachineCoverage(machine: AnyStateMachine): MachineCoverage {
  const states = definedStates(machine);
  const transitions = definedTransitions(machine);
  const visitedStates = new Set<string>();
  const visitedTransitions = new Set<string>();

  const recordSnapshot = (snapshot: unknown) => {
    for (const node of (snapshot as SnapshotWithNodes)._nodes ?? []) visitedStates.add(node.id);
  };
  const figures = (all: readonly string[], visited: ReadonlySet<string>): CoverageFigures => {
    const missing = all.filter((key) => !visited.has(key));
    const covered = all.length - missing.length;
    return {
      total: all.length,
      visited: covered,
      missing,
      ratio: all.length === 0 ? 1 : covered / all.length,
    };
  };

  return {
    inspect(inspection) {
      if (inspection.type !== "@xstate.microstep") return;
      const logic = (inspection.actorRef as { logic?: { id?: unknown } }).logic;
      if (logic?.id !== machine.id) return;
      for (const transition of inspection._transitions) {
        visitedTransitions.add(transitionKey(transition));
        // A transition taken from a state proves the state was active (transient initial states
        // are left in the initial macrostep, which emits no microstep of its own).
        visitedStates.add(transition.source.id);
      }
      recordSnapshot(inspection.snapshot);
    },
    recordSnapshot,
    report: () => ({
      states: figures(states, visitedStates),
      transitions: figures(transitions, visitedTransitions),
    }),
  };
}

/** How a traversal sees the machine: the events to try in each state and how to name states. */
export interface Traversal<TSnapshot, TEvent> {
  input?: unknown;
  events(snapshot: TSnapshot): TEvent[];
  /** An abstract state: equal strings are the same state for the traversal. */
  serializeState(snapshot: TSnapshot): string;
  serializeEvent(event: TEvent): string;
}

/** One step of a planned path: the event to send and the (abstract) state it must lead to. */
export interface PlannedStep<TSnapshot, TEvent> {
  event: TEvent;
  state: TSnapshot;
}

/** A planned path: its steps from the initial state. */
export type PlannedPath<TSnapshot, TEvent> = PlannedStep<TSnapshot, TEvent>[];

/**
 * `xstate/graph`'s declarations resolve xstate's types through another module path than the
 * machines', so TypeScript sees two unrelated copies: the traversal works on erased types.
 */
type GraphLogic = Parameters<typeof getShortestPaths>[0];
type GraphOptions = NonNullable<Parameters<typeof getShortestPaths>[1]>;

function graphOptions<TSnapshot, TEvent>(traversal: Traversal<TSnapshot, TEvent>): GraphOptions {
  return {
    ...(traversal.input !== undefined ? { input: traversal.input } : {}),
    events: (snapshot: unknown) => traversal.events(snapshot as TSnapshot),
    serializeState: (snapshot: unknown) => traversal.serializeState(snapshot as TSnapshot),
    serializeEvent: (event: unknown) => traversal.serializeEvent(event as TEvent),
  } as GraphOptions;
}

function stepsOf<TSnapshot, TEvent>(path: { steps: unknown[] }): PlannedPath<TSnapshot, TEvent> {
  // The first step of a graph path is the initial state, reached by no event of ours.
  return path.steps.slice(1) as PlannedPath<TSnapshot, TEvent>;
}

/**
 * Edge paths: for every transition of the state graph, the shortest path to its source state
 * followed by that transition's event. Replaying them all takes every edge the traversal found.
 */
export function planEdgePaths<TSnapshot, TEvent>(
  machine: AnyStateMachine,
  traversal: Traversal<TSnapshot, TEvent>,
): PlannedPath<TSnapshot, TEvent>[] {
  const logic = machine as unknown as GraphLogic;
  const options = graphOptions(traversal);
  const shortest = new Map<string, PlannedPath<TSnapshot, TEvent>>();
  for (const path of getShortestPaths(logic, options)) {
    shortest.set(traversal.serializeState(path.state as TSnapshot), stepsOf(path));
  }
  const adjacency = getAdjacencyMap(logic, options) as unknown as Record<
    string,
    { transitions: Record<string, PlannedStep<TSnapshot, TEvent>> }
  >;
  const paths: PlannedPath<TSnapshot, TEvent>[] = [];
  for (const [stateKey, { transitions }] of Object.entries(adjacency)) {
    const prefix = shortest.get(stateKey);
    if (prefix === undefined) throw new Error(`no shortest path to ${stateKey}`);
    for (const step of Object.values(transitions)) paths.push([...prefix, step]);
  }
  return paths;
}

/** Every simple path (no state visited twice) from the initial state to every reachable state. */
export function planSimplePaths<TSnapshot, TEvent>(
  machine: AnyStateMachine,
  traversal: Traversal<TSnapshot, TEvent>,
): PlannedPath<TSnapshot, TEvent>[] {
  const logic = machine as unknown as GraphLogic;
  return getSimplePaths(logic, graphOptions(traversal)).map((path) => stepsOf<TSnapshot, TEvent>(path));
}

/**
 * The path a given sequence of events takes (a scenario written by hand, e.g. tools finishing out
 * of order), planned with the same abstract states so it replays like the generated paths. Each
 * event must be one the traversal offers in the state it is sent in (the traversal's `events`
 * also keeps the graph getPathsFromEvents builds finite).
 */
export function planPathFromEvents<TSnapshot, TEvent>(
  machine: AnyStateMachine,
  events: TEvent[],
  traversal: Traversal<TSnapshot, TEvent>,
): PlannedPath<TSnapshot, TEvent> {
  const logic = machine as unknown as GraphLogic;
  // getPathsFromEvents builds its default start state without the input, so pass it explicitly.
  const fromState = getInitialSnapshot(machine, traversal.input);
  const [path] = getPathsFromEvents(
    logic,
    events as never[],
    {
      ...graphOptions(traversal),
      fromState,
    } as Parameters<typeof getPathsFromEvents>[2],
  );
  if (path === undefined) throw new Error("getPathsFromEvents found no path");
  return stepsOf(path);
}

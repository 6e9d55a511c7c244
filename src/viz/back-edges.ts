import type { GraphState } from "./machine-graph.js";

/** A drawn arrow between two states, by state id. */
export interface StateLink {
  source: string;
  target: string;
}

/**
 * The links to lay out against the flow, so that a statechart reads from each initial state
 * downwards: within every compound state, a depth-first search over its children (from the
 * initial child, then in document order) marks the links that close a cycle. A link is seen at the
 * level of the deepest state containing both ends, lifted to the two children of that state it
 * joins (a transition from `iterating.toolTurn` to `recoveringContext` is one from `iterating`).
 *
 * ELK would break the cycles itself, but by its own heuristics: it may as well lay the loop's entry
 * (`deciding → toolTurn`) upwards as its return. Self links and links between a state and its own
 * descendant are never reversed.
 *
 * @returns the indices into `links` of the links to reverse.
 */
export function findBackEdges(root: GraphState, links: readonly StateLink[]): Set<number> {
  const parentOf = new Map<string, GraphState>();
  const walk = (state: GraphState): void => {
    for (const child of state.children) {
      parentOf.set(child.id, state);
      walk(child);
    }
  };
  walk(root);

  const ancestors = (id: string): string[] => {
    const chain: string[] = [];
    for (let parent = parentOf.get(id); parent; parent = parentOf.get(parent.id)) chain.push(parent.id);
    return chain;
  };
  const childOf = (id: string, container: string): string => {
    let current = id;
    while (parentOf.get(current)?.id !== container) current = parentOf.get(current)!.id;
    return current;
  };

  /** container id → its lifted links, in document order. */
  const levels = new Map<string, Array<{ from: string; to: string; index: number }>>();
  links.forEach((link, index) => {
    if (link.source === link.target) return;
    const targetAncestors = new Set(ancestors(link.target));
    if (targetAncestors.has(link.source)) return;
    const container = ancestors(link.source).find((id) => targetAncestors.has(id));
    if (container === undefined) return;
    const from = childOf(link.source, container);
    const to = childOf(link.target, container);
    if (from === to) return;
    levels.set(container, [...(levels.get(container) ?? []), { from, to, index }]);
  });

  const reversed = new Set<number>();
  const states = new Map<string, GraphState>();
  const index = (state: GraphState): void => {
    states.set(state.id, state);
    state.children.forEach(index);
  };
  index(root);
  for (const [container, lifted] of levels) {
    const state = states.get(container)!;
    const starts = [state.initial, ...state.children.map((child) => child.id)].filter(
      (id): id is string => id !== undefined,
    );
    const visiting = new Set<string>();
    const visited = new Set<string>();
    const visit = (node: string): void => {
      visiting.add(node);
      for (const link of lifted) {
        if (link.from !== node) continue;
        if (visiting.has(link.to)) reversed.add(link.index);
        else if (!visited.has(link.to)) visit(link.to);
      }
      visiting.delete(node);
      visited.add(node);
    };
    for (const start of starts) if (!visited.has(start)) visit(start);
  }
  return reversed;
}

import type { GraphState, GraphTransition, MachineGraph } from "./machine-graph.js";

/**
 * Writes the graph model as a mermaid `stateDiagram-v2`. Mermaid state ids are global, so each
 * state gets an id built from its whole path (`iterating_finalTurn`) and shows its own key as the
 * label. Each transition is written inside the deepest state that contains both ends; invoked
 * actors and targetless transitions become description lines of their state.
 */
export function toMermaid(graph: MachineGraph): string {
  const mermaidIds = assignIds(graph.root);
  const parentOf = new Map<string, GraphState>();
  const walk = (state: GraphState): void => {
    for (const child of state.children) {
      parentOf.set(child.id, state);
      walk(child);
    }
  };
  walk(graph.root);
  const transitionsByContainer = new Map<string, GraphTransition[]>();
  for (const transition of graph.transitions) {
    const container = containerOf(transition, parentOf) ?? graph.root.id;
    transitionsByContainer.set(container, [...(transitionsByContainer.get(container) ?? []), transition]);
  }

  const lines = ["stateDiagram-v2"];
  const emit = (state: GraphState, indent: string): void => {
    const idOf = (id: string): string => mermaidIds.get(id) ?? sanitize(id);
    for (const child of state.children) {
      const id = idOf(child.id);
      lines.push(`${indent}state "${quote(child.key)}" as ${id}`);
      for (const invoke of child.invokes) lines.push(`${indent}${id} : invoke ${text(invoke.src)}`);
      for (const transition of graph.transitions) {
        if (transition.source === child.id && transition.targets.length === 0) {
          lines.push(`${indent}${id} : on ${text(transition.label)}`);
        }
      }
    }
    if (state.type === "parallel") {
      state.children.forEach((region, index) => {
        if (index > 0) lines.push(`${indent}--`);
        lines.push(`${indent}state ${idOf(region.id)} {`);
        emitBody(region, `${indent}  `);
        lines.push(`${indent}}`);
      });
    } else {
      if (state.initial) lines.push(`${indent}[*] --> ${idOf(state.initial)}`);
      for (const child of state.children) {
        if (child.children.length === 0) continue;
        lines.push(`${indent}state ${idOf(child.id)} {`);
        emitBody(child, `${indent}  `);
        lines.push(`${indent}}`);
      }
      for (const child of state.children) {
        if (child.type === "final") lines.push(`${indent}${idOf(child.id)} --> [*]`);
      }
    }
    for (const transition of transitionsByContainer.get(state.id) ?? []) {
      for (const target of transition.targets) {
        lines.push(`${indent}${idOf(transition.source)} --> ${idOf(target)} : ${text(transition.label)}`);
      }
    }
  };
  const emitBody = (state: GraphState, indent: string): void => {
    if (state.children.length > 0) emit(state, indent);
  };
  if (graph.root.type === "parallel") {
    // Mermaid only takes `--` (concurrent regions) inside a composite state.
    const id = sanitize(graph.name);
    lines.push(`  state "${quote(graph.name)}" as ${id}`, `  [*] --> ${id}`, `  state ${id} {`);
    emit(graph.root, "    ");
    lines.push("  }");
  } else {
    emit(graph.root, "  ");
  }
  return `${lines.join("\n")}\n`;
}

/** Mermaid ids: the path joined with `_`, made unique when two paths collapse to the same text. */
function assignIds(root: GraphState): Map<string, string> {
  const ids = new Map<string, string>();
  const used = new Set<string>();
  const visit = (state: GraphState): void => {
    if (state.path.length > 0) {
      const base = sanitize(state.path.join("_"));
      let id = base;
      for (let suffix = 2; used.has(id); suffix++) id = `${base}_${suffix}`;
      used.add(id);
      ids.set(state.id, id);
    }
    state.children.forEach(visit);
  };
  visit(root);
  return ids;
}

/** The deepest state strictly containing both ends of every target (the source's parent for self-loops). */
function containerOf(transition: GraphTransition, parentOf: Map<string, GraphState>): string | undefined {
  const chain = (id: string): string[] => {
    const ancestors: string[] = [];
    for (let parent = parentOf.get(id); parent; parent = parentOf.get(parent.id)) ancestors.push(parent.id);
    return ancestors;
  };
  const candidates = chain(transition.source);
  for (const target of transition.targets) {
    const targetChain = new Set(chain(target));
    while (candidates.length > 0 && !targetChain.has(candidates[0]!)) candidates.shift();
  }
  return candidates[0];
}

function sanitize(value: string): string {
  const cleaned = value.replace(/[^A-Za-z0-9_]/g, "_");
  return /^[A-Za-z_]/.test(cleaned) ? cleaned : `s_${cleaned}`;
}

/** Label text on one line; `;` and `#` start mermaid syntax, so they are spelled as entities. */
function text(value: string): string {
  return value.replace(/\s+/g, " ").replace(/#/g, "#35;").replace(/;/g, "#59;");
}

function quote(value: string): string {
  return text(value).replace(/"/g, "#quot;");
}

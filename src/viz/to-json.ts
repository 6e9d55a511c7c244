import type { MachineGraph } from "./machine-graph.js";

/** The graph model as pretty-printed JSON (`agentloop viz --format json`, `/api/machines/<name>.json`). */
export function toJson(graph: MachineGraph): string {
  return `${JSON.stringify(graph, null, 2)}\n`;
}

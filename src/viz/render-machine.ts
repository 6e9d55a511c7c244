import type { AnyStateMachine } from "xstate";
import { machineGraph } from "./machine-graph.js";
import { toJson } from "./to-json.js";
import { toMermaid } from "./to-mermaid.js";
import { toSvg } from "./to-svg.js";

export const VIZ_FORMATS = ["mermaid", "json", "svg"] as const;
export type VizFormat = (typeof VIZ_FORMATS)[number];

export interface RenderMachineOptions {
  /** Id prefix of the states (`chat` → `chat.iterating.finalTurn`); defaults to the machine id. */
  name?: string;
}

/**
 * Draws `machine` as mermaid text, the JSON graph model, or a self-contained SVG document. Async
 * because the SVG is laid out by ELK, whose `layout()` is.
 */
export async function renderMachine(
  machine: AnyStateMachine,
  format: VizFormat,
  options: RenderMachineOptions = {},
): Promise<string> {
  const graph = machineGraph(machine, options);
  switch (format) {
    case "mermaid":
      return toMermaid(graph);
    case "json":
      return toJson(graph);
    case "svg":
      return toSvg(graph);
  }
}

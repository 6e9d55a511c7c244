export type {
  GraphInvoke,
  GraphState,
  GraphStateType,
  GraphTransition,
  GraphTransitionKind,
  MachineGraph,
  MachineGraphOptions,
} from "./machine-graph.js";
export { machineGraph } from "./machine-graph.js";
export { getMachine, isMachineName, MACHINE_NAMES, type MachineName } from "./machines.js";
export { type RenderMachineOptions, renderMachine, VIZ_FORMATS, type VizFormat } from "./render-machine.js";
export { toJson } from "./to-json.js";
export { toMermaid } from "./to-mermaid.js";
export { toSvg } from "./to-svg.js";

import { getMachine, MACHINE_NAMES } from "../../viz/machines.js";
import { renderMachine, VIZ_FORMATS, type VizFormat } from "../../viz/render-machine.js";
import { type Command, UsageError } from "../cli-context.js";

/** `agentloop viz [--machine chat|iteration|session|compaction] [--format mermaid|json|svg]` */
export const vizCommand: Command = async (context) => {
  const name = typeof context.flags.machine === "string" ? context.flags.machine : "chat";
  const format = typeof context.flags.format === "string" ? context.flags.format : "mermaid";
  const machine = getMachine(name);
  if (!machine) throw new UsageError(`--machine must be one of ${MACHINE_NAMES.join(", ")}, got "${name}"`);
  if (!(VIZ_FORMATS as readonly string[]).includes(format)) {
    throw new UsageError(`--format must be one of ${VIZ_FORMATS.join(", ")}, got "${format}"`);
  }
  const text = await renderMachine(machine, format as VizFormat);
  context.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
  return 0;
};

import type { AnyStateMachine } from "xstate";
import { chatMachine } from "../../machines/chat.machine.js";
import { compactionMachine } from "../../machines/compaction.machine.js";
import { iterationMachine } from "../../machines/iteration.machine.js";
import { sessionMachine } from "../../machines/session.machine.js";

/** The machines `agentloop viz` and the UI can draw, by the name `StateChanged.machine` uses. */
export const MACHINE_NAMES = ["chat", "iteration", "session", "compaction"] as const;
export type MachineName = (typeof MACHINE_NAMES)[number];

const MACHINES: Record<MachineName, AnyStateMachine> = {
  chat: chatMachine,
  iteration: iterationMachine,
  session: sessionMachine,
  compaction: compactionMachine,
};

/** True for one of {@link MACHINE_NAMES}. */
export function isMachineName(name: string): name is MachineName {
  return (MACHINE_NAMES as readonly string[]).includes(name);
}

/** The machine definition named `name`, or undefined for an unknown name. */
export function getMachine(name: string): AnyStateMachine | undefined {
  return isMachineName(name) ? MACHINES[name] : undefined;
}

import type { InspectionEvent } from "xstate";
import type { EventEmitter } from "../events/event-emitter.js";

/**
 * A state value as a comparable string. The machines nest one level (the chat's
 * `{ iterating: "toolTurn" }`), so that shape is joined with a dot (a state name never holds one)
 * instead of going through `JSON.stringify` at every microstep; deeper or parallel values still do.
 */
function stateKey(value: unknown): string {
  if (typeof value === "string") return value;
  const record = value as Record<string, unknown>;
  let key: string | undefined;
  for (const name in record) {
    const child = record[name];
    if (key !== undefined || typeof child !== "string") return JSON.stringify(value);
    key = `${name}.${child}`;
  }
  return key ?? "{}";
}

/**
 * An XState inspector that publishes a StateChanged event for every machine of one root actor's
 * system (chat, iteration, compaction) each time its state value changes. One per root actor.
 */
export function createStateReporter(events: EventEmitter): (inspection: InspectionEvent) => void {
  const lastValues = new WeakMap<object, string>();
  return (inspection) => {
    // Microsteps arrive in the order the machines move (a child's final snapshot event would
    // arrive after its parent already moved on); the init event gives a new child's initial state.
    let snapshot: { value?: unknown };
    if (inspection.type === "@xstate.event" && inspection.event.type === "xstate.init") {
      snapshot = inspection.actorRef.getSnapshot() as { value?: unknown };
    } else if (inspection.type === "@xstate.microstep" || inspection.type === "@xstate.snapshot") {
      snapshot = inspection.snapshot as { value?: unknown };
    } else return;
    if (snapshot.value === undefined) return;
    const machine = (inspection.actorRef as { logic?: { id?: string } }).logic?.id ?? "unknown";
    const value = snapshot.value;
    const key = stateKey(value);
    if (lastValues.get(inspection.actorRef) === key) return;
    lastValues.set(inspection.actorRef, key);
    const context = (snapshot as { context?: { iteration?: number } }).context;
    events.emit(machine === "chat" ? 0 : (context?.iteration ?? 0), {
      kind: "StateChanged",
      machine,
      state: snapshot.value,
    });
  };
}

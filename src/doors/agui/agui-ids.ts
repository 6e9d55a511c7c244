/**
 * The identifiers the AG-UI door hands out and reads back. Pure; no imports of ours.
 *
 * An SSE event id is `<anchor>.<seq>.<index>`: `seq` is the sequence number of the agentloop event
 * the AG-UI event was made from (the JetStream event log's stream sequence, or the door's own
 * counter on the in-process bus), `index` its place among the AG-UI events made from that one
 * event, and `anchor` the sequence number of the event the run began at (the chat's ChatStarted,
 * or the ToolApprovalRequested a resumed run continues from). The anchor is what lets a reconnect
 * rebuild the run from the log alone.
 *
 * An interrupt id is `approval-<seq>-<toolCallId>`: the sequence number of the ToolApprovalRequested
 * event that held the call, so a resume finds the exact arguments the approver was shown.
 */

/** Where an AG-UI event of a run stands in the agentloop event log. */
export interface EventPosition {
  anchor: number;
  seq: number;
  index: number;
}

const EVENT_ID = /^(\d{1,15})\.(\d{1,15})\.(\d{1,6})$/;
const INTERRUPT_ID = /^approval-(\d{1,15})-(.+)$/s;

/** `<anchor>.<seq>.<index>`. */
export function formatEventId(position: EventPosition): string {
  return `${position.anchor}.${position.seq}.${position.index}`;
}

/** The position an SSE id names, or undefined when it is not one of ours. */
export function parseEventId(id: string): EventPosition | undefined {
  const match = EVENT_ID.exec(id.trim());
  if (match === null) return undefined;
  const [anchor, seq, index] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (anchor < 1 || seq < anchor) return undefined;
  return { anchor, seq, index };
}

/** True when `position` comes after `last` in the run's order. */
export function isAfter(position: EventPosition, last: EventPosition): boolean {
  return position.seq > last.seq || (position.seq === last.seq && position.index > last.index);
}

/** `approval-<seq>-<toolCallId>`. */
export function formatInterruptId(seq: number, toolCallId: string): string {
  return `approval-${seq}-${toolCallId}`;
}

/** The approval an interrupt id names, or undefined when it is not one of ours. */
export function parseInterruptId(id: string): { seq: number; toolCallId: string } | undefined {
  const match = INTERRUPT_ID.exec(id);
  if (match === null) return undefined;
  const seq = Number(match[1]);
  if (seq < 1) return undefined;
  return { seq, toolCallId: match[2]! };
}

/** The ids of the messages a chat's events become, the same whether streamed or rebuilt from history. */
export const messageIds = {
  user: (chatId: string) => `${chatId}-user`,
  /** The assistant's message of one model request (attempt > 1 after a stream reset). */
  assistant: (chatId: string, iteration: number, attempt: number) =>
    attempt > 1 ? `${chatId}-${iteration}-${attempt}` : `${chatId}-${iteration}`,
  reasoning: (chatId: string, iteration: number, attempt: number) =>
    `${messageIds.assistant(chatId, iteration, attempt)}-reasoning`,
  tool: (chatId: string, toolCallId: string) => `${chatId}-tool-${toolCallId}`,
};

/** A JSON Pointer token (RFC 6901): `~` and `/` escaped. */
export function pointerToken(name: string): string {
  return name.replace(/~/g, "~0").replace(/\//g, "~1");
}

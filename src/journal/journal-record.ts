import { z } from "zod";
import { MessageSchema } from "../context/message-schema.js";
import type { Message } from "../llm/types.js";
import {
  AnsweredChat,
  AskedChat,
  ChatProgress,
  type InFlightIteration,
  JournalEntry,
  QueuedChat,
} from "./journal-entry.js";

/**
 * One change to a session's {@link JournalEntry}: what {@link SessionJournal} did, as data. A
 * record holds the steps taken in one tick, applied in order by {@link applyStep}.
 */
export const JournalStep = z.discriminatedUnion("kind", [
  /** A chat begins, or a resumed one goes on as far as it got. */
  z.object({ kind: z.literal("chat"), chat: ChatProgress }),
  /** A message of the running chat (see `SessionJournal.record`). */
  z.object({ kind: z.literal("message"), message: MessageSchema }),
  /**
   * A call of the batch in flight is about to run; again with `asked` when it is about to ask
   * another agent's chat (`ask_agent`). A field, not a step kind of its own: a host of an earlier
   * version reads the record still (it drops the field), so a rolling upgrade tears no journal.
   */
  z.object({ kind: z.literal("started"), callId: z.string(), asked: AskedChat.optional() }),
  /** The running chat ended; with its answer when it has a client request id. */
  z.object({ kind: z.literal("end"), answered: AnsweredChat.optional() }),
  /** The reply under this request id is stored. */
  z.object({ kind: z.literal("forget"), requestId: z.string() }),
  z.object({ kind: z.literal("enqueue"), queued: QueuedChat }),
  /** Requests left the mailbox. */
  z.object({ kind: z.literal("take"), ids: z.array(z.string()) }),
  /** The session's tools that need approval (the whole set, sorted). */
  z.object({ kind: z.literal("approval"), toolNames: z.array(z.string()) }),
]);
export type JournalStep = z.infer<typeof JournalStep>;

/**
 * One stored record of a session's journal. Records are numbered from 1 in the order they are
 * written; a `snapshot` record holds the whole entry (a compaction), the records before it are
 * dropped after it is stored. `id` is unique per record, so a writer whose acknowledgement was
 * lost recognises its own record when it reads it back.
 */
export const JournalRecord = z.object({
  n: z.number().int().positive(),
  id: z.string(),
  snapshot: JournalEntry.optional(),
  steps: z.array(JournalStep),
});
export type JournalRecord = z.infer<typeof JournalRecord>;

/** A record as stored: its number (the row's or the key's) and its text. */
export interface StoredJournalRecord {
  n: number;
  text: string;
}

/** What a session's records add up to. */
export interface FoldedJournal {
  /** undefined: nothing readable is stored. */
  entry: JournalEntry | undefined;
  /** The highest record number stored, readable or not (0: none); the next record takes the one after. */
  lastN: number;
  /** Some records could not be applied (a torn or missing record): the next write should be a snapshot. */
  isTorn: boolean;
}

/** An entry with nothing in it. */
export function emptyEntry(): JournalEntry {
  return { chat: null, queued: [] };
}

/**
 * Folds a session's records, oldest first, into its entry. A snapshot starts over from the entry it
 * holds; any other record applies only if it follows the last applied one without a gap. After an
 * unreadable record or a gap (a torn tail: the host died while writing, or the record never got
 * there) nothing is applied until the next snapshot, so the entry is always a prefix of what was
 * written — as if the host had died a step earlier.
 */
export function foldJournal(stored: readonly StoredJournalRecord[]): FoldedJournal {
  let entry: JournalEntry | undefined;
  let appliedN: number | undefined;
  let isTorn = false;
  let lastN = 0;
  for (const { n, text } of [...stored].sort((a, b) => a.n - b.n)) {
    lastN = Math.max(lastN, n);
    const record = parseRecord(text);
    if (record?.snapshot !== undefined) {
      entry = structuredClone(record.snapshot);
      for (const step of record.steps) applyStep(entry, step);
      appliedN = n;
      isTorn = false;
    } else if (record !== undefined && !isTorn && record.n === n && n === (appliedN ?? 0) + 1) {
      entry ??= emptyEntry();
      for (const step of record.steps) applyStep(entry, step);
      appliedN = n;
    } else {
      isTorn = true;
    }
  }
  return { entry, lastN, isTorn };
}

function parseRecord(text: string): JournalRecord | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = JournalRecord.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

/** Applies one step to `entry` in place (the one place the entry's rules live). */
export function applyStep(entry: JournalEntry, step: JournalStep): void {
  switch (step.kind) {
    case "chat":
      entry.chat = step.chat;
      return;
    case "message":
      if (entry.chat !== null) recordMessage(entry.chat, step.message);
      return;
    case "started": {
      const inFlight = entry.chat?.inFlight;
      if (!inFlight) return;
      if (!inFlight.started.includes(step.callId)) inFlight.started.push(step.callId);
      if (step.asked !== undefined) inFlight.asked = { ...inFlight.asked, [step.callId]: step.asked };
      return;
    }
    case "end":
      entry.chat = null;
      if (step.answered !== undefined) entry.answered = [...(entry.answered ?? []), step.answered];
      return;
    case "forget": {
      const left = (entry.answered ?? []).filter((chat) => chat.requestId !== step.requestId);
      if (left.length === 0) delete entry.answered;
      else entry.answered = left;
      return;
    }
    case "enqueue":
      entry.queued.push(step.queued);
      return;
    case "take":
      entry.queued = entry.queued.filter((queued) => !step.ids.includes(queued.id));
      return;
    case "approval":
      entry.approvalRequired = [...step.toolNames];
      return;
  }
}

/**
 * A message of the running chat: an assistant turn closes the iteration in flight and opens the
 * next (in flight while it asks for tools), a tool result settles its call, anything else a tool
 * appended goes after the iteration's results.
 */
function recordMessage(chat: ChatProgress, message: Message): void {
  const inFlight = chat.inFlight;
  if (message.role === "assistant") {
    if (inFlight !== null) chat.messages.push(...settledIteration(inFlight));
    chat.inFlight = null;
    chat.iteration++;
    if (message.toolCalls?.length)
      chat.inFlight = { assistant: message, started: [], results: {}, appended: [] };
    else if (!isEmptyAssistant(message)) chat.messages.push(message);
  } else if (message.role === "tool" && inFlight !== null && message.toolCallId !== undefined) {
    inFlight.results[message.toolCallId] = message;
  } else if (inFlight !== null) {
    inFlight.appended.push(message);
  } else {
    chat.messages.push(message);
  }
}

/** The messages of a finished iteration: the assistant turn, its results in call order, then what the tools appended. */
export function settledIteration(inFlight: InFlightIteration): Message[] {
  const results = (inFlight.assistant.toolCalls ?? []).flatMap((call) => {
    const result = inFlight.results[call.id];
    return result === undefined ? [] : [result];
  });
  return [inFlight.assistant, ...results, ...inFlight.appended];
}

/** An assistant turn with nothing in it (the chat leaves it out of the conversation). */
function isEmptyAssistant(message: Message): boolean {
  const content = message.content;
  return (
    (typeof content === "string" ? content.trim() === "" : content.length === 0) &&
    !message.thinkingBlocks?.length
  );
}

import { z } from "zod";
import { MessageSchema } from "../context/message-schema.js";

/** A chat another agent runs because a call of this chat asked it (`ask_agent`). */
export const AskedChat = z.object({ agent: z.string(), session: z.string() });
export type AskedChat = z.infer<typeof AskedChat>;

/**
 * The iteration a chat was in when its progress was last written: the assembled assistant message,
 * the calls whose start was journaled (before they ran) and the results that came back.
 */
export const InFlightIteration = z.object({
  assistant: MessageSchema,
  /** Ids of the calls whose start was written before they ran. */
  started: z.array(z.string()),
  /** Settled results (tool messages) by call id. */
  results: z.record(z.string(), MessageSchema),
  /** Messages the tools added with `ctx.appendMessage` (placed after every result). */
  appended: z.array(MessageSchema),
  /**
   * The chats the calls asked, by call id: when a call is left in doubt by a host that died, the
   * chat it asked has nobody waiting for its answer, so the resumed chat stops it.
   */
  asked: z.record(z.string(), AskedChat).optional(),
});
export type InFlightIteration = z.infer<typeof InFlightIteration>;

/**
 * An unfinished chat, as far as it got: enough to go on after the host died. The history holds the
 * conversation up to `chatStart`; `messages` are this chat's finished messages (the user message,
 * then whole iterations), of which the history may already hold a prefix (the user message is
 * persisted before the first model request).
 */
export const ChatProgress = z.object({
  chatId: z.string(),
  /** The user's text (the chat starts over from it when not even the user message was written). */
  userText: z.string(),
  /** The chat request's client `id`: the resumed chat's reply is stored under it for retries. */
  requestId: z.string().optional(),
  /** How many messages the history held before this chat. */
  chatStart: z.number().int().nonnegative(),
  /** The iteration in flight (1-based; 0 before the first). */
  iteration: z.number().int().nonnegative(),
  messages: z.array(MessageSchema),
  inFlight: InFlightIteration.nullable(),
});
export type ChatProgress = z.infer<typeof ChatProgress>;

/** A chat request waiting in the session's mailbox (the reply goes nowhere after a restart). */
export const QueuedChat = z.object({
  id: z.string(),
  text: z.string(),
  type: z.string().optional(),
  stackable: z.boolean().optional(),
  depth: z.number().int().nonnegative().optional(),
  /** The chat request's client `id` (see {@link ChatProgress}). */
  requestId: z.string().optional(),
});
export type QueuedChat = z.infer<typeof QueuedChat>;

/**
 * A chat with a client request id that ended with an answer, kept until its reply is stored under
 * that id (so a host that dies in between leaves the answer to the next owner).
 */
export const AnsweredChat = z.object({
  requestId: z.string(),
  chatId: z.string(),
  result: z.string(),
  usage: z.object({ prompt: z.number(), completion: z.number(), total: z.number(), cached: z.number() }),
});
export type AnsweredChat = z.infer<typeof AnsweredChat>;

/** What a session has not finished: the running chat and the chats queued behind it, in order. */
export const JournalEntry = z.object({
  chat: ChatProgress.nullable(),
  queued: z.array(QueuedChat),
  /** Answers whose replies are not stored yet under their request ids. */
  answered: z.array(AnsweredChat).optional(),
  /**
   * Tools whose calls need approval in this session because an agent that asked it (`ask_agent`)
   * needs approval for them: a chat resumed from this entry asks for them too.
   */
  approvalRequired: z.array(z.string()).optional(),
});
export type JournalEntry = z.infer<typeof JournalEntry>;

/** Whether an entry holds nothing to finish. */
export function isEmptyEntry(entry: JournalEntry): boolean {
  return entry.chat === null && entry.queued.length === 0 && !entry.answered?.length;
}

import { NO_SECRETS, type SecretRedactor } from "../text/secret-redactor.js";
import type { AgentEvent, EventBody } from "./types.js";

/**
 * Stamps an event body with the session's identity, a per-session seq and a timestamp. The seq is
 * monotonic per session across rebuilds when the session's history keeps a mark (see
 * {@link EventEmitterParams.reserveSeq}).
 */
export interface EventEmitter {
  /**
   * Emits one event; listeners' exceptions are swallowed (best-effort). `chatId` overrides the
   * current chat's ("" for session-level events that belong to no chat).
   */
  emit(iteration: number, body: EventBody, chatId?: string): void;
  /** The chat id the next events carry. */
  chatId: string;
  /** The seq of the last event emitted. */
  readonly seq: number;
}

export interface EventEmitterParams {
  agent: string;
  session: string;
  /** The host id every event carries as `host`; absent (left out of the JSON) when unset. */
  host?: string;
  listeners: ReadonlyArray<(event: AgentEvent) => void>;
  now?: () => Date;
  /** Hides the configured secrets in every event's fields. Default: none (no cost). */
  redactor?: SecretRedactor;
  /** The highest seq the session may have used before (restored from history); default 0. */
  lastSeq?: number;
  /**
   * Persists a seq mark: called before the first event and then whenever the seq passes the last
   * mark, with a mark {@link SEQ_RESERVATION_BLOCK} ahead. Whatever stops this emitter (a
   * passivation, a restart, a crash), no event got a seq above the stored mark, so a session rebuilt
   * from it numbers its events above every one it published before.
   */
  reserveSeq?: (mark: number) => void;
}

/**
 * How many seqs one mark reserves: one persisted write per this many events, and at most this
 * many numbers skipped when a session is rebuilt.
 */
export const SEQ_RESERVATION_BLOCK = 1_000;

/**
 * The best-effort event publisher every actor of a session reports through. A throwing listener
 * never reaches the chat: observability must not change the conversation.
 */
export function createEventEmitter({
  agent,
  session,
  host,
  listeners,
  now,
  redactor = NO_SECRETS,
  lastSeq = 0,
  reserveSeq,
}: EventEmitterParams): EventEmitter {
  let seq = lastSeq;
  let reserved = lastSeq;
  // Events come in bursts (a delta every few µs): format the clock once per millisecond.
  let lastMs = Number.NaN;
  let lastIso = "";
  const timestamp = (): string => {
    if (now) return now().toISOString();
    const ms = Date.now();
    if (ms !== lastMs) {
      lastMs = ms;
      lastIso = new Date(ms).toISOString();
    }
    return lastIso;
  };
  const emitter: EventEmitter = {
    chatId: "",
    get seq() {
      return seq;
    },
    emit(iteration, body, chatId = emitter.chatId) {
      seq += 1;
      if (seq > reserved && reserveSeq !== undefined) {
        reserved = seq + SEQ_RESERVATION_BLOCK - 1;
        try {
          reserveSeq(reserved);
        } catch {
          // Best-effort like the events themselves: the chat goes on.
        }
      }
      // Nobody listening: the seq still advances, nothing is built.
      if (listeners.length === 0) return;
      const event = {
        agent,
        session,
        host,
        chatId,
        seq,
        ts: timestamp(),
        iteration,
        // Events leave the process (NATS, JetStream files, the UI): a tool call's arguments, an
        // error message or a delta may quote a key. Only the body carries free text.
        ...(redactor.isActive ? redactor.redactValue(body) : body),
      } as AgentEvent;
      for (const listener of listeners) {
        try {
          listener(event);
        } catch {
          // Best-effort by contract (SPEC §9).
        }
      }
    },
  };
  return emitter;
}

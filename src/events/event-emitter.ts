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
  /**
   * The current chat's place in an agent tree: set while a chat another agent asked runs, so every
   * event of that chat (not the session-level ones, emitted with another `chatId`) carries
   * `parent` and `root`.
   */
  lineage: EventLineage | undefined;
  /** The seq of the last event emitted. */
  readonly seq: number;
}

/** What {@link EventEmitter.lineage} adds to each event of a child chat. */
export interface EventLineage {
  parent: { agent: string; session: string; chatId: string; toolCallId?: string };
  root: { agent: string; session: string; chatId: string };
}

/** The fields the emitter stamps on every event, in the order the event carries them. */
export interface EventStamp {
  agent: string;
  session: string;
  /** Undefined when the emitter has no host id: the event then carries `host: undefined`. */
  host: string | undefined;
  chatId: string;
  seq: number;
  ts: string;
  iteration: number;
}

/** See {@link TAKES_STAMPED_EVENTS}. */
export type StampedEventListener = (stamp: Readonly<EventStamp>, body: EventBody) => void;

/**
 * The key under which a listener may offer to take each event as its stamp and its (redacted) body
 * instead of the merged event object: the bus publisher writes the JSON straight from the two, so
 * the object is never built. The emitter uses it only when that listener is its only one (any
 * other listener needs the object anyway). The event is `{...stamp, ...body}`; the stamp object is
 * the emitter's own, reused for the next event, so it is read during the call only.
 */
export const TAKES_STAMPED_EVENTS: unique symbol = Symbol("agentloop.takesStampedEvents");

/** A listener, possibly offering the stamped form (see {@link TAKES_STAMPED_EVENTS}). */
type EventListenerOffer = ((event: AgentEvent) => void) & { [TAKES_STAMPED_EVENTS]?: StampedEventListener };

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
export function createEventEmitter(params: EventEmitterParams): EventEmitter {
  return new SessionEventEmitter(params);
}

/**
 * {@link createEventEmitter}'s emitter. A class rather than an object literal over closures: every
 * live session holds one, and the literal (with its `seq` accessor) was kept as a dictionary-mode
 * object with a closure per method, about 0.7 KB per session; prototype methods cost nothing per
 * session.
 */
class SessionEventEmitter implements EventEmitter {
  chatId = "";
  lineage: EventLineage | undefined = undefined;
  readonly #agent: string;
  readonly #session: string;
  readonly #host: string | undefined;
  readonly #listeners: ReadonlyArray<(event: AgentEvent) => void>;
  readonly #now: (() => Date) | undefined;
  readonly #redactor: SecretRedactor;
  readonly #reserveSeq: ((mark: number) => void) | undefined;
  #seq: number;
  #reserved: number;
  // Events come in bursts (a delta every few µs): format the clock once per millisecond.
  #lastMs = Number.NaN;
  #lastIso = "";
  // The stamped form's stamp: one object, its per-event fields overwritten before each call.
  readonly #stamp: EventStamp;

  constructor({
    agent,
    session,
    host,
    listeners,
    now,
    redactor = NO_SECRETS,
    lastSeq = 0,
    reserveSeq,
  }: EventEmitterParams) {
    this.#agent = agent;
    this.#session = session;
    this.#host = host;
    this.#listeners = listeners;
    this.#now = now;
    this.#redactor = redactor;
    this.#reserveSeq = reserveSeq;
    this.#seq = lastSeq;
    this.#reserved = lastSeq;
    this.#stamp = { agent, session, host, chatId: "", seq: 0, ts: "", iteration: 0 };
  }

  get seq(): number {
    return this.#seq;
  }

  emit(iteration: number, body: EventBody, chatId: string = this.chatId): void {
    const seq = ++this.#seq;
    const reserveSeq = this.#reserveSeq;
    if (seq > this.#reserved && reserveSeq !== undefined) {
      this.#reserved = seq + SEQ_RESERVATION_BLOCK - 1;
      try {
        reserveSeq(this.#reserved);
      } catch {
        // Best-effort like the events themselves: the chat goes on.
      }
    }
    const listeners = this.#listeners;
    // Nobody listening: the seq still advances, nothing is built.
    if (listeners.length === 0) return;
    const ts = this.#timestamp();
    // Events leave the process (NATS, JetStream files, the UI): a tool call's arguments, an
    // error message or a delta may quote a key. Only the body carries free text.
    const redactor = this.#redactor;
    const redacted = redactor.isActive ? redactor.redactValue(body) : body;
    const { lineage } = this;
    // Only a child chat's own events: the body's fields come after the stamp, as a reader expects.
    const eventBody =
      lineage === undefined || chatId !== this.chatId
        ? redacted
        : ({ ...redacted, parent: lineage.parent, root: lineage.root } as unknown as EventBody);
    if (listeners.length === 1) {
      const takeStamped = (listeners[0] as EventListenerOffer)[TAKES_STAMPED_EVENTS];
      if (takeStamped !== undefined) {
        const stamp = this.#stamp;
        stamp.chatId = chatId;
        stamp.seq = seq;
        stamp.ts = ts;
        stamp.iteration = iteration;
        try {
          takeStamped(stamp, eventBody);
        } catch {
          // Best-effort: a failing listener must not stop the chat or the other listeners.
        }
        return;
      }
    }
    const event = {
      agent: this.#agent,
      session: this.#session,
      host: this.#host,
      chatId,
      seq,
      ts,
      iteration,
      ...eventBody,
    } as AgentEvent;
    for (const listener of listeners) {
      try {
        listener(event);
      } catch {
        // Best-effort: a failing listener must not stop the chat or the other listeners.
      }
    }
  }

  #timestamp(): string {
    if (this.#now) return this.#now().toISOString();
    const ms = Date.now();
    if (ms !== this.#lastMs) {
      this.#lastMs = ms;
      this.#lastIso = new Date(ms).toISOString();
    }
    return this.#lastIso;
  }
}

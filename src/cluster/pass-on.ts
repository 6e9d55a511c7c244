import { headers as createHeaders, errors, type NatsConnection } from "@nats-io/transport-node";
import type { BusMessage } from "../bus/bus.js";

/**
 * What an empty request on `subject` finds: an answer (a live host answers it `bad_request` at
 * once), `nobody` (no responders: nothing subscribes), or `silent` (something subscribes but did
 * not answer within `timeoutMs`: a host paused, cut off or too busy to answer yet).
 */
export async function probe(
  connection: NatsConnection,
  subject: string,
  timeoutMs: number,
): Promise<"answered" | "nobody" | "silent"> {
  try {
    await connection.request(subject, "{}", { timeout: timeoutMs });
    return "answered";
  } catch (error) {
    const isNobody =
      error instanceof errors.NoRespondersError ||
      (error instanceof errors.RequestError && error.isNoResponders());
    return isNobody ? "nobody" : "silent";
  }
}

/** Whether something answers on `subject` within `timeoutMs` (see {@link probe}): silence counts as nobody. */
export async function answersProbe(
  connection: NatsConnection,
  subject: string,
  timeoutMs: number,
): Promise<boolean> {
  return (await probe(connection, subject, timeoutMs)) === "answered";
}

/**
 * Reachability probes shared by the requests that need them. A host forwarding a request must know
 * the owner still answers (a request passed on to a host that died is lost: core NATS delivers it
 * at most once, to nobody), but one probe per forwarded request doubled the owner's work and added
 * a round trip to every request that landed on the wrong host. So a probe that answered counts for
 * `freshMs` after it was sent, and requests arriving while a probe of the same subject is under way
 * wait for that one. A silent or absent owner is never remembered: the next request probes again.
 * The window is short next to how long a killed host's subscriptions outlive it on the server, so
 * it adds little to the requests such a kill loses anyway.
 */
export class SharedProbes {
  readonly #probe: (subject: string) => Promise<boolean>;
  readonly #freshMs: number;
  readonly #now: () => number;
  /** When a probe of the subject that was then answered was sent. */
  readonly #answeredAt = new Map<string, number>();
  readonly #pending = new Map<string, Promise<boolean>>();

  constructor(probe: (subject: string) => Promise<boolean>, freshMs: number, now: () => number = Date.now) {
    this.#probe = probe;
    this.#freshMs = freshMs;
    this.#now = now;
  }

  isReachable(subject: string): Promise<boolean> {
    const answeredAt = this.#answeredAt.get(subject);
    if (answeredAt !== undefined && this.#now() - answeredAt < this.#freshMs) return Promise.resolve(true);
    const pending = this.#pending.get(subject);
    if (pending !== undefined) return pending;
    const sentAt = this.#now();
    const probing = this.#probe(subject).then(
      (isAnswered) => this.#settle(subject, sentAt, isAnswered),
      () => this.#settle(subject, sentAt, false),
    );
    this.#pending.set(subject, probing);
    return probing;
  }

  #settle(subject: string, sentAt: number, isAnswered: boolean): boolean {
    this.#pending.delete(subject);
    if (isAnswered) {
      // One entry per host and verb probed: a handful, but hosts come and go over a long life.
      if (this.#answeredAt.size >= MAX_REMEMBERED_PROBES) this.#answeredAt.clear();
      this.#answeredAt.set(subject, sentAt);
    } else this.#answeredAt.delete(subject);
    return isAnswered;
  }
}

const MAX_REMEMBERED_PROBES = 1_024;

/**
 * Publishes a request received here to `subject` with the requester's reply subject, so whoever
 * takes it there answers the requester directly, with `headers` (none when not given).
 */
export function passOnRequest(
  connection: NatsConnection,
  subject: string,
  message: BusMessage,
  headers?: Record<string, string>,
): void {
  let natsHeaders: ReturnType<typeof createHeaders> | undefined;
  if (headers !== undefined) {
    natsHeaders = createHeaders();
    for (const [key, value] of Object.entries(headers)) natsHeaders.set(key, value);
  }
  connection.publish(subject, message.data, {
    ...(natsHeaders === undefined ? {} : { headers: natsHeaders }),
    ...(message.reply === undefined ? {} : { reply: message.reply }),
  });
}

import type { Endpoint, Service, ServiceMsg } from "@nats-io/services";
import { Svcm } from "@nats-io/services";
import type { NatsConnection } from "@nats-io/transport-node";
import { describeError } from "../errors/describe-error.js";

/** How one request ended, for `$SRV.STATS`: an error reply counts as an error with its reason. */
export type EndpointOutcome = { isError: false } | { isError: true; reason: string };

export interface CountedEndpointOptions {
  subject: string;
  queue: string;
  metadata?: Record<string, string>;
  /** Handles one request; resolves once its reply (or stream) is complete. Must not reject. */
  handle(message: ServiceMsg): Promise<EndpointOutcome>;
}

/**
 * One endpoint's requests as they settled, shown in `$SRV.STATS` as the endpoint's `data.replies`
 * (the NATS micro stats' own field names; times in nanoseconds).
 */
export interface ReplyCounts {
  /** Requests whose reply (or stream) is complete. */
  num_requests: number;
  /** Of those, the ones answered with an error (an `ok: false` reply, an error status). */
  num_errors: number;
  /** The reason of the last error. */
  last_error?: string;
  /** Time from each request's arrival to its complete reply, summed. */
  processing_time: number;
  average_processing_time: number;
}

const NANOS_PER_MS = 1_000_000;

/**
 * Counts what a service's endpoints answered, by endpoint subject, and shows it through the
 * service's public `statsHandler`.
 *
 * `@nats-io/services` measures a handler's synchronous part and counts an error only when the
 * handler throws (it then answers with error headers itself). Our handlers answer later, and our
 * own contract's error replies must stay plain JSON without headers (backward compatibility), so
 * the library's `num_errors` and `processing_time` stay near zero; the true counts are ours, in
 * each endpoint's `data.replies`. The library's `num_requests` still counts requests as they arrive.
 *
 * @example
 * ```ts
 * const counts = new EndpointCounts();
 * const service = await servicesOn(connection).add({ name, version, statsHandler: counts.statsHandler() });
 * addCountedEndpoint(service, counts, "chat", { subject, queue, handle });
 * ```
 */
export class EndpointCounts {
  readonly #bySubject = new Map<string, ReplyCounts>();
  readonly #now: () => number;

  constructor(options: { now?: () => number } = {}) {
    this.#now = options.now ?? Date.now;
  }

  /** The counts of the endpoint on `subject` (all zero before its first complete reply). */
  of(subject: string): ReplyCounts {
    const counts = this.#bySubject.get(subject);
    return counts === undefined ? emptyCounts() : { ...counts };
  }

  /**
   * A `statsHandler` for the service's config: each endpoint's `data` is `extra()`'s fields
   * (host-wide counters) and `replies`, that endpoint's {@link ReplyCounts}.
   */
  statsHandler(extra?: () => Record<string, unknown>): (endpoint: Endpoint) => Promise<unknown> {
    return async (endpoint) => ({ ...extra?.(), replies: this.of(endpoint.subject) });
  }

  /** Counts how the handling of one request on `subject` ends. */
  track(subject: string, handling: Promise<EndpointOutcome>): void {
    const startedAt = this.#now();
    void handling.then(
      (outcome) => this.#record(subject, startedAt, outcome),
      (failure: unknown) =>
        this.#record(subject, startedAt, { isError: true, reason: describeError(failure) }),
    );
  }

  #record(subject: string, startedAt: number, outcome: EndpointOutcome): void {
    let counts = this.#bySubject.get(subject);
    if (counts === undefined) {
      counts = emptyCounts();
      this.#bySubject.set(subject, counts);
    }
    counts.num_requests++;
    counts.processing_time += Math.max(0, this.#now() - startedAt) * NANOS_PER_MS;
    counts.average_processing_time = Math.round(counts.processing_time / counts.num_requests);
    if (outcome.isError) {
      counts.num_errors++;
      counts.last_error = outcome.reason;
    }
  }
}

function emptyCounts(): ReplyCounts {
  return { num_requests: 0, num_errors: 0, processing_time: 0, average_processing_time: 0 };
}

/**
 * Adds an endpoint whose requests `counts` counts once each reply is complete (see
 * {@link EndpointCounts}); the service must have been created with `counts.statsHandler()`.
 */
export function addCountedEndpoint(
  service: Service,
  counts: EndpointCounts,
  name: string,
  options: CountedEndpointOptions,
): void {
  service.addEndpoint(name, {
    subject: options.subject,
    queue: options.queue,
    ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
    handler: (error, message) => {
      if (error !== null) return;
      counts.track(options.subject, options.handle(message));
    },
  });
}

/**
 * The services API on our connection. `@nats-io/services` carries its own copy of
 * `@nats-io/nats-core` (a newer prerelease): the connection is the same protocol object at run
 * time, only the two copies' type declarations differ.
 */
export function servicesOn(connection: NatsConnection): Svcm {
  return new Svcm(connection as unknown as ConstructorParameters<typeof Svcm>[0]);
}

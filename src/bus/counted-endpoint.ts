import { type Service, type ServiceMsg, Svcm } from "@nats-io/services";
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

/** The endpoint statistics object the services library keeps per endpoint (not in its typings). */
interface EndpointStatsInternals {
  num_errors: number;
  last_error?: string;
  processing_time: number;
  num_requests: number;
  average_processing_time: number;
}

const NANOS_PER_MS = 1_000_000;

/**
 * Adds an endpoint whose `$SRV.STATS` tell the truth about asynchronous handlers.
 *
 * `@nats-io/services` measures a handler's synchronous part and counts an error only when the
 * handler throws (it then answers with error headers itself). Our handlers answer later, and our
 * own contract's error replies must stay plain JSON without headers (backward compatibility), so
 * once a request settles its whole processing time and its error (if any) are added to the
 * endpoint's statistics object. That object is the library's internal (3.0.0-25); when a later
 * version lays it out differently, the library's own counts remain (requests only) — the
 * micro-service tests (test/protocol) notice.
 */
export function addCountedEndpoint(service: Service, name: string, options: CountedEndpointOptions): void {
  service.addEndpoint(name, {
    subject: options.subject,
    queue: options.queue,
    ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
    handler: (error, message) => {
      if (error !== null) return;
      const startedAt = Date.now();
      void options.handle(message).then(
        (outcome) => record(service, name, startedAt, outcome),
        (failure: unknown) =>
          record(service, name, startedAt, {
            isError: true,
            reason: describeError(failure),
          }),
      );
    },
  });
}

function record(service: Service, name: string, startedAt: number, outcome: EndpointOutcome): void {
  const stats = statsOf(service, name);
  if (stats === undefined) return;
  stats.processing_time += (Date.now() - startedAt) * NANOS_PER_MS;
  if (stats.num_requests > 0) {
    stats.average_processing_time = Math.round(stats.processing_time / stats.num_requests);
  }
  if (outcome.isError) {
    stats.num_errors++;
    stats.last_error = outcome.reason;
  }
}

function statsOf(service: Service, name: string): EndpointStatsInternals | undefined {
  const handlers = (service as unknown as { handlers?: unknown }).handlers;
  if (!Array.isArray(handlers)) return undefined;
  for (const handler of handlers as Array<{ name?: unknown; stats?: unknown }>) {
    if (handler.name !== name) continue;
    const stats = handler.stats as Partial<EndpointStatsInternals> | undefined;
    const isUsable =
      typeof stats?.num_errors === "number" &&
      typeof stats.processing_time === "number" &&
      typeof stats.num_requests === "number";
    return isUsable ? (stats as EndpointStatsInternals) : undefined;
  }
  return undefined;
}

/**
 * The services API on our connection. `@nats-io/services` carries its own copy of
 * `@nats-io/nats-core` (a newer prerelease): the connection is the same protocol object at run
 * time, only the two copies' type declarations differ.
 */
export function servicesOn(connection: NatsConnection): Svcm {
  return new Svcm(connection as unknown as ConstructorParameters<typeof Svcm>[0]);
}

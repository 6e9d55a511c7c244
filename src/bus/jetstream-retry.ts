import { JetStreamApiError } from "@nats-io/jetstream";
import { errors } from "@nats-io/transport-node";
import { UnavailableError } from "../errors/unavailable-error.js";

const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 1_000;
/** How long {@link retryTransient} keeps trying by default. */
const DEFAULT_DEADLINE_MS = 30_000;

export interface RetryOptions {
  /** Default 30 s. */
  deadlineMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Which failures {@link retryTransient} tries again after. Default {@link isTransientNatsError}. */
  isRetried?: (error: unknown) => boolean;
}

/**
 * Runs a JetStream read or purge, again after a transient failure (see {@link isTransientNatsError}),
 * until `deadlineMs`.
 * @throws UnavailableError (retryable) when it never succeeded before the deadline.
 */
export async function retryTransient<T>(
  what: string,
  operation: () => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  const deadline = now() + deadlineMs;
  for (let backoffMs = FIRST_BACKOFF_MS; ; backoffMs = Math.min(MAX_BACKOFF_MS, backoffMs * 2)) {
    try {
      return await operation();
    } catch (error) {
      if (!(options.isRetried ?? isTransientNatsError)(error)) throw error;
      const left = deadline - now();
      if (left <= 0) {
        throw new UnavailableError(
          `JetStream did not answer (${what}) within ${Math.round(deadlineMs / 1000)} s`,
          {
            cause: error,
          },
        );
      }
      await sleep(Math.min(backoffMs, left));
    }
  }
}

/**
 * A JetStream cluster that cannot place a stream's replicas yet ("no suitable peers for placement",
 * JSClusterNoPeersErrF): its servers accept clients before they have all joined, so a stream or
 * bucket asked for with 3 replicas is refused until they have. Worth waiting out while a host starts
 * (and only then: a cluster too small for the replicas asked for answers the same, for good).
 */
export function isClusterFormingError(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === 10005;
}

/**
 * Two hosts creating the same stream or bucket at the same moment: nats-server may answer one of
 * them "subjects overlap with an existing stream" (JSStreamSubjectOverlapErr) while the other's
 * stream is being made, though both asked for the same thing. Asked again, the stream is there and
 * the ensure opens it. A real overlap (an operator's stream on our subjects) answers the same for
 * good, so this is worth only a few quick tries ({@link CREATION_RACE_TRIES}).
 */
export function isCreationRaceError(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === 10065;
}

/** How many times a start tries again after {@link isCreationRaceError}. */
export const CREATION_RACE_TRIES = 5;

/**
 * Creates (or opens) a stream or bucket while a host starts: again after a transient failure or a
 * cluster still forming (see {@link isClusterFormingError}), for up to `deadlineMs` (default 30 s),
 * and a few times after a creation race with another host ({@link isCreationRaceError}).
 * The operation must be safe to repeat (an "ensure": open it when it exists).
 */
export function whileStarting<T>(
  what: string,
  operation: () => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  let races = 0;
  return retryTransient(what, operation, {
    ...options,
    isRetried: (error) =>
      isTransientNatsError(error) ||
      isClusterFormingError(error) ||
      (isCreationRaceError(error) && ++races <= CREATION_RACE_TRIES),
  });
}

/**
 * Errors of a connection that is down or a server that is still starting: the same write may work
 * a moment later. Everything else (a refusal, a closed connection, a permission) is not retried.
 */
export function isTransientNatsError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error instanceof errors.TimeoutError || error instanceof errors.RequestError) return true;
  if (error instanceof errors.NoRespondersError || error instanceof errors.ConnectionError) return true;
  // Thrown by the JetStream client when nothing answered on its API subject (no responders).
  if (error.name === "JetStreamNotEnabled") return true;
  // "JetStream system temporarily unavailable", or the account's JetStream not up yet after a restart.
  return error instanceof JetStreamApiError && (error.code === 10008 || error.code === 10039);
}

import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { isTransientNatsError } from "../bus/jetstream-retry.js";
import { UnavailableError } from "../errors/unavailable-error.js";

/** How long a write keeps trying through an outage before it fails `unavailable`. */
export const DURABLE_PUBLISH_DEADLINE_MS = 30_000;
/** How long one attempt waits for its acknowledgement. */
const ATTEMPT_TIMEOUT_MS = 2_000;
const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 1_000;

/** One acknowledged JetStream publish that identifies itself. */
export interface DurablePublish {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  subject: string;
  data: Uint8Array;
  headers?: MsgHdrs;
  /**
   * Unique per record: sent as `Nats-Msg-Id`, so the server drops a retried copy within its
   * duplicate window, and compared with the subject's last message when a retry is refused.
   */
  msgId: string;
  /** The subject's last sequence this write expects (undefined: no expectation). */
  expectedLastSubjectSeq?: number;
}

export interface DurablePublishOptions {
  /** Default {@link DURABLE_PUBLISH_DEADLINE_MS}. */
  deadlineMs?: number;
  /** Default `ATTEMPT_TIMEOUT_MS` (2 s). */
  attemptTimeoutMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Publishes a record and returns its stream sequence, surviving a short NATS outage: a write whose
 * acknowledgement was lost (the server restarted mid-publish, the connection dropped) is sent again
 * under the same msg id until it is acknowledged, for up to `deadlineMs`. A copy the server already
 * stored is recognised — by the server's duplicate window, or, when a retry is refused because the
 * subject moved on (its expected last sequence), by reading the subject's last message back and
 * finding this record's id there — so a retried write is never stored twice and never mistaken for
 * another writer's. A refusal that is not our own record is thrown as it came (the caller's conflict).
 *
 * @throws UnavailableError (retryable) when no attempt was acknowledged before the deadline.
 */
export async function publishDurably(
  publish: DurablePublish,
  options: DurablePublishOptions = {},
): Promise<number> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const deadlineMs = options.deadlineMs ?? DURABLE_PUBLISH_DEADLINE_MS;
  const deadline = now() + deadlineMs;
  let backoffMs = FIRST_BACKOFF_MS;
  for (;;) {
    let failure: unknown;
    try {
      const ack = await publish.js.publish(publish.subject, publish.data, {
        msgID: publish.msgId,
        timeout: options.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS,
        ...(publish.headers === undefined ? {} : { headers: publish.headers }),
        expect: {
          streamName: publish.stream,
          ...(publish.expectedLastSubjectSeq === undefined
            ? {}
            : { lastSubjectSequence: publish.expectedLastSubjectSeq }),
        },
      });
      return ack.seq;
    } catch (error) {
      failure = error;
    }
    if (isWrongLastSequence(failure)) {
      // Either an earlier attempt of ours was stored (its ack lost) or another writer came first.
      const own = await ownSequence(publish).catch((error: unknown) => {
        if (!isTransientNatsError(error)) throw error;
        return "unknown" as const;
      });
      if (typeof own === "number") return own;
      if (own === "other") throw failure;
    } else if (!isTransientNatsError(failure)) {
      throw failure;
    }
    const left = deadline - now();
    if (left <= 0) {
      throw new UnavailableError(
        `JetStream did not acknowledge a write to ${publish.subject} within ${Math.round(deadlineMs / 1000)} s`,
        { cause: failure },
      );
    }
    await sleep(Math.min(backoffMs, left));
    backoffMs = Math.min(MAX_BACKOFF_MS, backoffMs * 2);
  }
}

/** The subject's last message's sequence when it is this record; "other" when it is not. */
async function ownSequence(publish: DurablePublish): Promise<number | "other"> {
  const last = await publish.jsm.streams.getMessage(publish.stream, { last_by_subj: publish.subject });
  return last !== null && last.header.get("Nats-Msg-Id") === publish.msgId ? last.seq : "other";
}

function isWrongLastSequence(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence;
}

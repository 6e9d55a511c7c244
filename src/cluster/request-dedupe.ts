import { createHash } from "node:crypto";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { ChatReply } from "../bus/contract.js";
import { DEFAULT_PREFIX, jetStreamName } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { sleep } from "../timers/sleep.js";
import { isConflict } from "./session-lease.js";

/**
 * Client retries are safe: a chat request with an `id` is answered at most once per
 * id and session. A retry while the chat runs on this host joins it (same reply); one after it
 * finished gets the stored reply from the KV bucket `AGENTLOOP_REPLIES` for the dedupe window
 * (the bucket's max age, plus a `storedAt` check by the reader). A chat is marked `running` in the
 * bucket before it starts, so a retry that reaches another host after a failover is never run a
 * second time.
 *
 * After a failover the chat's request id travels in the session's journal: the next owner resumes
 * the chat (or the queued one) and {@link RequestDedupe.adopt}s it — marks it `running` under its
 * own host id, lets retries join it, stores its reply as `done`. Retries are forwarded to the
 * session's owner, and the owner resumes the journal when it takes the session, before it answers
 * any request; so a retry that still finds another host's `running` mark and nothing to join is
 * for a run that left nothing to resume (lost before its journal entry was written, or ended just
 * before the crash): it is answered `cancelled`, never run again.
 *
 * Records are written with compare-and-set on the revision the host last wrote: a host that lost
 * the session (paused past its lease) cannot overwrite the reply its successor stored.
 */

/** How long a record's read or write is retried while NATS does not answer (a restart). */
const STORE_RETRY_MS = 30_000;

/** NATS's default max_payload, for a connection that has not said its own. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** Room left in a record for the headers JetStream adds to a KV write. */
const RECORD_HEADROOM_BYTES = 1_024;

/** The bucket for the default prefix. */
export const REPLY_BUCKET = "AGENTLOOP_REPLIES";

/** Default `--dedupe-window`: 10 minutes. */
export const DEFAULT_DEDUPE_WINDOW_MS = 10 * 60 * 1000;

const StoredReply = z.object({
  state: z.enum(["running", "done"]),
  host: z.string(),
  storedAt: z.number(),
  reply: ChatReply.optional(),
});
type StoredReply = z.infer<typeof StoredReply>;

/** `AGENTLOOP_REPLIES` for the default prefix, `<PREFIX>_REPLIES` otherwise. */
export function replyBucketName(prefix: string = DEFAULT_PREFIX): string {
  return jetStreamName(prefix, "REPLIES");
}

/** `<agent>.<session>.<sha256(id), 40 hex>`: ids are free text, KV keys are not. */
export function replyKey(agent: string, session: string, id: string): string {
  return `${agent}.${session}.${createHash("sha256").update(id).digest("hex").slice(0, 40)}`;
}

export interface RequestDedupeOptions {
  hostId: string;
  windowMs?: number;
  /** Wall clock, ms since the epoch. */
  now?: () => number;
  log?: (line: string) => void;
}

/** What a deduped chat came to: its reply, and whether it ran at all (a session that could not start did not). */
export interface DedupedChat {
  reply: ChatReply;
  /** False: nothing ran (the host was closing, full…), so a retry may run it. Default true. */
  ran?: boolean;
}

/** A chat {@link RequestDedupe.begin} marked running here: hand it to {@link RequestDedupe.finish}. */
export interface DedupeRun {
  readonly key: string;
  /** The revision of this host's `running` mark (undefined when it could not be written, or is not yet). */
  revision: number | undefined;
  /** The `running` mark was written (or tried): see {@link RequestDedupe.claim}. */
  isClaimed: boolean;
  /** Answers the retries that joined this run. */
  readonly settle: (reply: ChatReply) => void;
}

/** What {@link RequestDedupe.begin} found: a reply to send as it is, or a run to do and finish. */
export type DedupeStep = { reply: ChatReply } | { run: DedupeRun };

/** See the module comment. One per host. */
export class RequestDedupe {
  readonly windowMs: number;
  readonly #kv: KV;
  readonly #hostId: string;
  readonly #now: () => number;
  readonly #log: (line: string) => void;
  readonly #maxPayload: () => number | undefined;
  readonly #running = new Map<string, Promise<ChatReply | undefined>>();

  private constructor(kv: KV, options: RequestDedupeOptions, maxPayload: () => number | undefined) {
    this.#kv = kv;
    this.#maxPayload = maxPayload;
    this.#hostId = options.hostId;
    this.windowMs = options.windowMs ?? DEFAULT_DEDUPE_WINDOW_MS;
    this.#now = options.now ?? Date.now;
    this.#log = options.log ?? (() => {});
  }

  /** Creates the bucket if needed (max age = the window) and opens it. */
  static async open(
    connection: NatsConnection,
    options: RequestDedupeOptions & { prefix?: string; replicas?: number },
  ): Promise<RequestDedupe> {
    const windowMs = options.windowMs ?? DEFAULT_DEDUPE_WINDOW_MS;
    const kv = await new Kvm(connection).create(replyBucketName(options.prefix), {
      history: 1,
      ttl: windowMs,
      replicas: options.replicas ?? 1,
    });
    return new RequestDedupe(kv, { ...options, windowMs }, () => connection.info?.max_payload);
  }

  /** Chats with an id running on this host now. */
  get running(): number {
    return this.#running.size;
  }

  /**
   * The first step of answering a chat request with an `id`, before it runs: a run of this id in
   * progress here is joined, a stored reply returned, a run another host started and did not
   * finish refused — `{ reply }`, nothing to run. Otherwise the id is marked running here and
   * `{ run }` comes back: the caller runs the chat and hands its reply to {@link finish}, which
   * stores it and answers the retries that joined meanwhile. Every `{ run }` must be finished.
   */
  async begin(
    agent: string,
    session: string,
    id: string,
    options: { claimLater?: boolean } = {},
  ): Promise<DedupeStep> {
    const key = replyKey(agent, session, id);
    for (;;) {
      const joined = this.#running.get(key);
      if (joined === undefined) break;
      const reply = await joined;
      if (reply !== undefined) return { reply };
      // An adopted chat that turned out to have nothing to run: the record decides.
    }
    let settle: (reply: ChatReply) => void = () => {};
    this.#track(
      key,
      new Promise<ChatReply>((resolve) => {
        settle = resolve;
      }),
    );
    // Most ids are new: marked running in one write that expects no record; else the record is read.
    let mark: StoredReply | undefined;
    if (options.claimLater !== true) {
      mark = this.#runningMark();
      const created = await this.#create(key, mark);
      if (typeof created === "number") return { run: { key, revision: created, isClaimed: true, settle } };
      if (created === "taken") mark = undefined;
    }
    const stored = await this.#read(key);
    // A mark found equal to the one just tried is that write, stored though it failed (its ack lost).
    const isOwnMark = mark !== undefined && stored?.host === mark.host && stored.storedAt === mark.storedAt;
    if (stored !== undefined && !isOwnMark && this.#now() - stored.storedAt <= this.windowMs) {
      const reply =
        stored.state === "done" && stored.reply !== undefined
          ? stored.reply
          : stored.state === "running"
            ? interruptedReply(stored.host, this.#hostId)
            : undefined;
      if (reply !== undefined) {
        settle(reply);
        return { reply };
      }
    }
    const run: DedupeRun = { key, revision: undefined, isClaimed: false, settle };
    if (options.claimLater !== true) await this.claim(run);
    return { run };
  }

  /**
   * Marks the run `running` in the bucket, so that a retry on the next owner of the session, after
   * this host died, is not run a second time when the session's journal shows nothing of it. A
   * host with a journal marks it only once the chat is stored there (queued): until then a retry
   * finds no mark and runs the chat, which is right, since nothing of it ran.
   */
  async claim(run: DedupeRun): Promise<void> {
    if (run.isClaimed) return;
    run.isClaimed = true;
    run.revision = await this.#write(run.key, this.#runningMark());
  }

  /**
   * The last step of a run {@link begin} handed out: stores its reply (a chat that did not run at
   * all, `ran: false` — the session could not start — leaves no record, so a retry runs it; a chat
   * cut off by a lost or handed-over lease keeps its `running` mark for the next owner, see
   * {@link isCutOff}; so does one `parked`: stopped by a shutdown or hand-off while it awaited a
   * tool approval, it continues on the session's next host, which answers the id) and answers the
   * retries that joined it. Resolves once stored.
   */
  async finish(
    run: DedupeRun,
    reply: ChatReply,
    options: { ran?: boolean; parked?: boolean } = {},
  ): Promise<void> {
    try {
      if (options.ran === false) {
        if (run.isClaimed) await this.#forget(run.key, run.revision);
      } else if (!isCutOff(reply) && options.parked !== true) await this.#store(run.key, reply, run.revision);
    } finally {
      run.settle(reply);
    }
  }

  /**
   * {@link begin}, `chat`, {@link finish} in one call, for callers that run the chat in a closure
   * (the host calls the steps itself).
   */
  async answer(
    agent: string,
    session: string,
    id: string,
    chat: () => Promise<DedupedChat>,
  ): Promise<ChatReply> {
    const step = await this.begin(agent, session, id);
    if ("reply" in step) return step.reply;
    let outcome: DedupedChat = {
      reply: { ok: false, error: { code: "internal", message: "the chat failed before it answered" } },
      ran: false,
    };
    try {
      outcome = await chat();
    } finally {
      await this.finish(step.run, outcome.reply, outcome.ran === false ? { ran: false } : {});
    }
    return outcome.reply;
  }

  /**
   * A chat this host resumed from the session's journal, carrying the client's request `id`:
   * marked `running` here, joined by retries, its reply stored as `done` once it ends. A reply
   * already stored stands (the dead host stored it, then died before its journal caught up); a
   * `reply` resolving undefined (nothing was left to run) leaves the record as it was; one cut off
   * here in turn (this host lost or handed over the lease) is not stored, the joined retries are
   * answered `unavailable` and the next owner resumes it. Resolves once the reply is stored.
   */
  adopt(
    agent: string,
    session: string,
    id: string,
    reply: Promise<ChatReply | undefined>,
  ): Promise<ChatReply | undefined> {
    const key = replyKey(agent, session, id);
    const run = (async () => {
      const stored = await this.#read(key);
      if (stored?.state === "done" && stored.reply !== undefined) return stored.reply;
      const revision = await this.#write(key, this.#runningMark());
      const answer = await reply;
      if (answer !== undefined && isCutOff(answer)) return answer;
      if (answer !== undefined) await this.#store(key, answer, revision);
      else if (stored !== undefined && revision !== undefined) await this.#restore(key, stored, revision);
      return answer;
    })();
    this.#track(key, run);
    return run;
  }

  #track(key: string, run: Promise<ChatReply | undefined>): void {
    this.#running.set(key, run);
    const untrack = () => {
      if (this.#running.get(key) === run) this.#running.delete(key);
    };
    run.then(untrack, untrack);
  }

  /**
   * The stored record. A read that fails (NATS restarting) is retried for a while: taken as "no
   * record", it would run a retried chat a second time.
   */
  async #read(key: string): Promise<StoredReply | undefined> {
    const deadline = Date.now() + STORE_RETRY_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        const entry = await this.#kv.get(key);
        if (entry === null || entry.operation !== "PUT") return undefined;
        const parsed = StoredReply.safeParse(entry.json());
        return parsed.success ? parsed.data : undefined;
      } catch (error) {
        if (Date.now() >= deadline) {
          this.#log(`could not read the dedupe record ${key}: ${describeError(error)}`);
          return undefined;
        }
        await pause(attempt);
      }
    }
  }

  /** A chat that never ran leaves no record: a retry runs it. */
  async #forget(key: string, revision: number | undefined): Promise<void> {
    try {
      await this.#kv.delete(key, revision === undefined ? {} : { previousSeq: revision });
    } catch (error) {
      if (revision === undefined)
        this.#log(`could not remove the dedupe record ${key}: ${describeError(error)}`);
    }
  }

  /**
   * Stores the reply over this host's own `running` mark (compare-and-set on its revision): when
   * another host has written the record since — it took the session over and resumed the chat —
   * its record stands.
   */
  async #store(key: string, reply: ChatReply, revision: number | undefined): Promise<void> {
    let record: StoredReply = { state: "done", host: this.#hostId, storedAt: this.#now(), reply };
    if (Buffer.byteLength(JSON.stringify(record)) > this.#maxRecordBytes()) {
      // The requester got the reply; a retry gets this instead of a second run.
      record = { ...record, reply: tooLargeToKeepReply(reply) };
    }
    if (revision === undefined) {
      await this.#write(key, record);
      return;
    }
    // A failure other than a conflict (NATS restarting, a timeout) is retried: given up at once, it
    // would leave the `running` mark, and every retry of this answered chat would be refused.
    const deadline = Date.now() + STORE_RETRY_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#kv.update(key, JSON.stringify(record), revision);
        return;
      } catch (error) {
        if (isConflict(error)) {
          // An earlier attempt may have been stored, its acknowledgement lost.
          const current = attempt > 1 ? await this.#read(key) : undefined;
          if (current?.state === "done" && current.host === this.#hostId) return;
          this.#log(
            `the dedupe record ${key} was not stored: another host wrote it since (${describeError(error)})`,
          );
          return;
        }
        if (Date.now() >= deadline) {
          this.#log(`could not store the dedupe record ${key}: ${describeError(error)}`);
          return;
        }
        await pause(attempt);
      }
    }
  }

  /** The largest record the server takes (its max_payload, less room for the headers). */
  #maxRecordBytes(): number {
    return (this.#maxPayload() ?? DEFAULT_MAX_PAYLOAD) - RECORD_HEADROOM_BYTES;
  }

  /** Puts back the record an adopted chat replaced, when nothing was left to run (it names the host that ran it). */
  async #restore(key: string, record: StoredReply, revision: number): Promise<void> {
    try {
      await this.#kv.update(key, JSON.stringify(record), revision);
    } catch {
      // Written by another host since: its record stands.
    }
  }

  /**
   * Writes `mark` only where the id has no record (or a removed one): its revision; "taken" when a
   * record is there; "unknown" when the write failed otherwise (it may still have been stored).
   */
  async #create(key: string, mark: StoredReply): Promise<number | "taken" | "unknown"> {
    try {
      return await this.#kv.create(key, JSON.stringify(mark));
    } catch (error) {
      return isConflict(error) ? "taken" : "unknown";
    }
  }

  /** The record of a chat running on this host. */
  #runningMark(): StoredReply {
    return { state: "running", host: this.#hostId, storedAt: this.#now() };
  }

  /** Best-effort: a dedupe record that cannot be written does not stop the chat or its reply. */
  async #write(key: string, record: StoredReply): Promise<number | undefined> {
    try {
      return await this.#kv.put(key, JSON.stringify(record));
    } catch (error) {
      this.#log(`could not store the dedupe record ${key}: ${describeError(error)}`);
      return undefined;
    }
  }
}

/** A retry of a run that left nothing to resume or join: never run a second time. */
/**
 * A chat cut off because this host gave its session up (lease lost, shard handed over): answered
 * `unavailable`, which is no answer to keep. Its `running` mark stays: the session's next owner
 * resumes the chat from its journal and stores the real answer, which a retry of the id then gets.
 */
function isCutOff(reply: ChatReply): boolean {
  return !reply.ok && reply.error.code === "unavailable";
}

function interruptedReply(runHost: string, hostId: string): ChatReply {
  const who = runHost === hostId ? "this host (an earlier run)" : `host ${runHost}`;
  return {
    ok: false,
    error: {
      code: "cancelled",
      message: `a chat with this id was started by ${who}, which stopped before it answered, and nothing of it was left to resume; it is not run a second time (its user message, and its answer if it got one, are in the session history)`,
    },
  };
}

/** The stored answer to an id whose reply is too large for a record of the bucket. */
function tooLargeToKeepReply(reply: ChatReply): ChatReply {
  const outcome = reply.ok ? "answered" : `answered with an error (${reply.error.code})`;
  return {
    ok: false,
    error: {
      code: "reply_too_large",
      message: `a chat with this id was ${outcome}, but its reply is too large to keep for retries; it is not run a second time (its answer is in the session history)`,
    },
  };
}

/** Waits a little longer after each failed attempt (250 ms, 500 ms, … at most 2 s). */
function pause(attempt: number): Promise<void> {
  return sleep(Math.min(2_000, 250 * attempt));
}

import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_EVENT_MAX_AGE_MS, eventStreamName, replayEvents } from "../../bus/event-log.js";
import { whileStarting } from "../../bus/jetstream-retry.js";
import { jetStreamName, sessionEventsPattern } from "../../bus/subjects.js";
import { parseEventJson } from "../../events/parse-event.js";
import type { AgentEvent } from "../../events/types.js";
import { advanceProgress, initialProgress, type TaskProgress, TaskRecord } from "./task-progress.js";

/** The KV bucket of A2A tasks: `AGENTLOOP_A2A_TASKS` for the default prefix. */
export function taskBucketName(prefix: string): string {
  return jetStreamName(prefix, "A2A_TASKS");
}

/** One event read from the log, with where it was stored. */
export interface LoggedEvent {
  seq: number;
  event: AgentEvent;
}

/**
 * The door's view of NATS: the tasks' records in a KV bucket (key `<agent>.<task id>`), their
 * chats' events in the JetStream event log. Nothing of a task lives in this process, so a task
 * outlives the door and the host that ran it.
 */
export class TaskLog {
  readonly #connection: NatsConnection;
  readonly #prefix: string;
  readonly #kv: KV;

  private constructor(connection: NatsConnection, prefix: string, kv: KV) {
    this.#connection = connection;
    this.#prefix = prefix;
    this.#kv = kv;
  }

  /** Opens (creating when needed) the bucket; its records live as long as the events do. */
  static async open(connection: NatsConnection, prefix: string): Promise<TaskLog> {
    // Hosts starting together create it together (see whileStarting).
    const kv = await whileStarting("the A2A task bucket", () =>
      new Kvm(connection).create(taskBucketName(prefix), {
        history: 1,
        ttl: DEFAULT_EVENT_MAX_AGE_MS,
      }),
    );
    return new TaskLog(connection, prefix, kv);
  }

  /** The event log's next sequence: a chat sent after this call has its events from here. */
  async nextEventSeq(): Promise<number> {
    const manager = await jetstreamManager(this.#connection);
    const info = await manager.streams.info(eventStreamName(this.#prefix));
    return info.state.last_seq + 1;
  }

  async put(record: TaskRecord): Promise<void> {
    await this.#kv.put(taskKey(record.agent, record.id), JSON.stringify(record));
  }

  /** The task's record, or undefined when there is none (never made, expired, malformed). */
  async get(agent: string, taskId: string): Promise<TaskRecord | undefined> {
    if (!isKeyToken(taskId)) return undefined;
    const entry = await this.#kv.get(taskKey(agent, taskId));
    if (entry === null || entry.operation !== "PUT") return undefined;
    return parseRecord(entry.string());
  }

  /** Every task record of the agent (unordered). */
  async list(agent: string): Promise<TaskRecord[]> {
    const keys: string[] = [];
    for await (const key of await this.#kv.keys(`${agent}.*`)) keys.push(key);
    const records = await Promise.all(
      keys.map(async (key) => {
        const entry = await this.#kv.get(key);
        return entry === null || entry.operation !== "PUT" ? undefined : parseRecord(entry.string());
      }),
    );
    return records.filter((record) => record !== undefined);
  }

  /**
   * The task's progress from the events logged so far, and the sequence to follow on from
   * (`nextSeq`): a reader that follows from there misses nothing and sees nothing twice.
   */
  async snapshot(
    record: TaskRecord,
    signal?: AbortSignal,
  ): Promise<{ progress: TaskProgress; nextSeq: number }> {
    let progress = initialProgress(record);
    let nextSeq = record.fromSeq;
    for await (const stored of replayEvents(this.#connection, {
      prefix: this.#prefix,
      filter: sessionEventsPattern(this.#prefix, record.agent, record.contextId),
      since: { seq: record.fromSeq },
      ...(signal === undefined ? {} : { signal }),
    })) {
      nextSeq = stored.seq + 1;
      if (stored.isKnownKind) progress = advanceProgress(progress, record.id, stored.event);
    }
    return { progress, nextSeq };
  }

  /**
   * The session's events from `fromSeq` on, stored and then live, until `signal` aborts: an
   * ordered JetStream consumer, so a reader on any host sees the same events in the same order.
   */
  async *follow(record: TaskRecord, fromSeq: number, signal: AbortSignal): AsyncGenerator<LoggedEvent> {
    signal.throwIfAborted();
    const consumer = await jetstream(this.#connection).consumers.get(eventStreamName(this.#prefix), {
      filter_subjects: sessionEventsPattern(this.#prefix, record.agent, record.contextId),
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: fromSeq,
    });
    const messages = await consumer.consume({ max_messages: 256 });
    const stop = (): void => void messages.stop();
    signal.addEventListener("abort", stop, { once: true });
    try {
      for await (const message of messages) {
        if (signal.aborted) break;
        const parsed = parseEventJson(message.string());
        if (parsed.status === "known") yield { seq: message.seq, event: parsed.event };
      }
    } finally {
      signal.removeEventListener("abort", stop);
      messages.stop();
      await consumer.delete().catch(() => {
        // Ephemeral: the server drops it after its inactivity threshold anyway.
      });
    }
  }
}

function taskKey(agent: string, taskId: string): string {
  return `${agent}.${taskId}`;
}

/** Task ids the door makes are UUIDs; anything that cannot be one KV key token is no task of ours. */
function isKeyToken(taskId: string): boolean {
  return /^[A-Za-z0-9_-]{1,128}$/.test(taskId);
}

function parseRecord(text: string): TaskRecord | undefined {
  try {
    const parsed = TaskRecord.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

import { createWriteStream, openSync, type WriteStream } from "node:fs";
import type { Bus } from "../../bus/bus.js";
import { type ReplayStart, replayEvents } from "../../bus/event-log.js";
import { NatsBus } from "../../bus/nats-bus.js";
import { isProbeMessage } from "../../bus/probe-message.js";
import { allEventsPattern, isValidPattern } from "../../bus/subjects.js";
import { describeError } from "../../errors/describe-error.js";
import { parseEventJson } from "../../events/parse-event.js";
import type { AgentEvent, EventKind, UnknownEvent } from "../../events/types.js";
import { type CliContext, type Command, UsageError } from "../cli-context.js";
import { connectCommandToNats, untilAborted } from "../command-helpers.js";
import { createPalette, formatEventLine } from "../format-event.js";

/** Events `up`'s built-in logger leaves out: one per token or per state, they would drown the rest. */
export const NOISY_EVENT_KINDS: readonly EventKind[] = [
  "ModelTextDelta",
  "ModelReasoningDelta",
  "StateChanged",
];

export interface EventLogger {
  /**
   * Prints the event (and appends it to the JSONL file when there is one). An event of a kind newer
   * than this version is logged too, as it came: the logging service keeps everything.
   */
  write(event: AgentEvent | UnknownEvent): void;
  /** Flushes and closes the JSONL file. */
  close(): Promise<void>;
}

/**
 * The logging service's output: one readable line per event on `stdout`, coloured only
 * on a TTY, and optionally every event as one JSON object per line appended to `jsonlPath`.
 *
 * The file is opened here, synchronously, so a path that cannot be written is a one-line
 * {@link UsageError} before anything starts (a stream opened lazily would emit an unhandled
 * `error` and crash the process). A write failure later (disk full) is told once through
 * `onFileError` and the file is given up; printing goes on.
 *
 * @throws UsageError when `jsonlPath` cannot be opened for appending.
 */
export function createEventLogger(options: {
  stdout: CliContext["stdout"];
  jsonlPath?: string;
  /** Kinds printed to stdout are all but these (the JSONL file still gets everything). */
  skipKinds?: readonly EventKind[];
  /** Told once when appending to the JSONL file fails after it was opened. Default: nothing. */
  onFileError?: (error: unknown) => void;
}): EventLogger {
  const palette = createPalette(options.stdout.isTTY === true);
  const skip = new Set(options.skipKinds ?? []);
  const depths = createTreeDepths();
  let file: WriteStream | undefined;
  if (options.jsonlPath !== undefined) {
    const path = options.jsonlPath;
    let fd: number;
    try {
      fd = openSync(path, "a");
    } catch (error) {
      throw new UsageError(`--jsonl ${path}: cannot open it for appending (${describeError(error)})`);
    }
    const stream = createWriteStream(path, { fd });
    stream.on("error", (error) => {
      if (file !== stream) return;
      file = undefined;
      options.onFileError?.(error);
    });
    file = stream;
  }
  return {
    write(event) {
      file?.write(`${JSON.stringify(event)}\n`);
      const depth = depths.of(event);
      if (!skip.has(event.kind as EventKind)) {
        options.stdout.write(`${formatEventLine(event, palette, depth)}\n`);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        const open = file;
        file = undefined;
        if (open === undefined || open.destroyed) return resolve();
        // An error while flushing was already reported (or is not worth more than the exit).
        open.once("error", () => resolve());
        open.end(() => resolve());
      }),
  };
}

/** `--since 90s | 5m | 2h | 1d | 1500ms` (a duration) or `--since 42` (a stream sequence). */
export function parseSince(value: string | boolean | undefined): ReplayStart | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "string") {
    // A sequence past 2^53 cannot be named exactly (nor does a stream hold that many).
    if (/^\d+$/.test(value) && Number(value) >= 1 && Number.isSafeInteger(Number(value))) {
      return { seq: Number(value) };
    }
    const duration = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(value);
    if (duration) {
      const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[duration[2] as "ms"];
      // Longer ago than the clock's start is "from the start".
      const durationMs = Number(duration[1]) * unit;
      if (Number.isFinite(durationMs)) return { durationMs: Math.min(durationMs, Date.now()) };
    }
  }
  throw new UsageError(
    `--since must be a duration (e.g. 90s, 5m, 2h, 1d) or a stream sequence number, got "${String(value)}"`,
  );
}

/** Identity of an event across the log and the live feed (seq restarts for a session without a history). */
function eventKey(event: AgentEvent | UnknownEvent): string {
  return `${event.agent}\u0000${event.session}\u0000${event.chatId}\u0000${event.seq}\u0000${event.kind}`;
}

/**
 * Follows `filter` on `bus`, first replaying the stored events `since` from the JetStream log when
 * asked. Live events arriving during the replay are held back and printed after it, minus those
 * the replay already printed, so nothing is lost or shown twice. Resolves when `signal` aborts.
 */
export async function followEvents(options: {
  bus: Bus;
  prefix: string;
  filter: string;
  since?: ReplayStart;
  logger: EventLogger;
  signal: AbortSignal;
  /** Told about payloads on the filter (live or stored) that are not events, with the reason. */
  onInvalid?: (subject: string, reason: string) => void;
}): Promise<void> {
  const { bus, logger } = options;
  let held: Array<AgentEvent | UnknownEvent> | undefined = options.since === undefined ? undefined : [];
  const subscription = bus.subscribe(options.filter, (message) => {
    // A host's start-up permission probe: not an event, and nothing to warn about.
    if (isProbeMessage(message)) return;
    const parsed = parseEventJson(message.data);
    if (parsed.status === "invalid") {
      options.onInvalid?.(message.subject, parsed.reason);
      return;
    }
    if (held !== undefined) held.push(parsed.event);
    else logger.write(parsed.event);
  });
  try {
    if (options.since !== undefined) {
      if (!(bus instanceof NatsBus))
        throw new UsageError("--since needs a NATS server with JetStream (the event log)");
      await bus.flush();
      const replayed = new Set<string>();
      for await (const stored of replayEvents(bus.connection, {
        filter: options.filter,
        since: options.since,
        prefix: options.prefix,
        signal: options.signal,
        ...(options.onInvalid === undefined
          ? {}
          : { onSkipped: (record) => options.onInvalid?.(record.subject, record.reason) }),
      })) {
        replayed.add(eventKey(stored.event));
        logger.write(stored.event);
      }
      const backlog = held ?? [];
      held = undefined;
      for (const event of backlog) if (!replayed.has(eventKey(event))) logger.write(event);
    }
    await untilAborted(options.signal);
  } finally {
    subscription.unsubscribe();
  }
}

/**
 * `agentloop tail [FILTER] [--jsonl FILE] [--since DURATION|SEQ]`: the logging service:
 * prints every event on the subject filter (default `<prefix>.events.>`) until SIGINT / SIGTERM.
 */
export const tailCommand: Command = async (context) => {
  const { config, flags, positionals } = context;
  if (positionals.length > 1) throw new UsageError("tail takes one FILTER (a subject pattern)");
  const filter = positionals[0] ?? allEventsPattern(config.prefix);
  if (!isValidPattern(filter)) throw new UsageError(`FILTER must be a NATS subject pattern, got "${filter}"`);
  if (flags.jsonl === true || flags.jsonl === "") throw new UsageError("--jsonl needs a FILE");
  const since = parseSince(flags.since);
  const log = allEventsPattern(config.prefix);
  if (since !== undefined && !patternsOverlap(filter, log)) {
    throw new UsageError(
      `--since replays the event log of ${log}, and FILTER "${filter}" lies outside it (is --prefix set to the host's prefix?)`,
    );
  }
  const logger = createEventLogger({
    stdout: context.stdout,
    ...(typeof flags.jsonl === "string" ? { jsonlPath: flags.jsonl } : {}),
    onFileError: (error) => {
      const reason = describeError(error);
      context.stderr.write(`agentloop tail: stopped writing ${String(flags.jsonl)}: ${reason}\n`);
    },
  });
  const bus = await connectCommandToNats(context, "tail");
  if (typeof bus === "number") {
    await logger.close();
    return bus;
  }
  let hasWarned = false;
  try {
    await followEvents({
      bus,
      prefix: config.prefix,
      filter,
      ...(since === undefined ? {} : { since }),
      logger,
      signal: context.signal,
      onInvalid: (subject, reason) => {
        if (hasWarned) return;
        hasWarned = true;
        context.stderr.write(
          `agentloop tail: skipping payloads that are not events (first on ${subject}: ${reason})\n`,
        );
      },
    });
    return 0;
  } catch (error) {
    // Stopped during the replay: that is a normal end.
    if (context.signal.aborted) return 0;
    throw error;
  } finally {
    await logger.close();
    await bus.close();
  }
};

/**
 * True when some subject matches both patterns. The event log only stores `<prefix>.events.>`, and
 * JetStream refuses a replay filter outside it with a cryptic API error: tell the user instead.
 */
export function patternsOverlap(first: string, second: string): boolean {
  const a = first.split(".");
  const b = second.split(".");
  for (let index = 0; index < Math.max(a.length, b.length); index++) {
    const left = a[index];
    const right = b[index];
    if (left === ">" || right === ">") return left !== undefined && right !== undefined;
    if (left === undefined || right === undefined) return false;
    if (left !== "*" && right !== "*" && left !== right) return false;
  }
  return true;
}

/** Chats remembered for nesting at most; the oldest are forgotten first. */
const MAX_TRACKED_CHATS = 10_000;

/**
 * How deep each event's chat sits in its agent tree, for indenting: a chat with a `parent` one
 * step below the parent's chat (known from the parent's own events, else directly below a root).
 */
function createTreeDepths(): { of(event: AgentEvent | UnknownEvent): number } {
  const depths = new Map<string, number>();
  return {
    of(event) {
      const parent = (event as { parent?: { chatId?: unknown } }).parent;
      if (parent === undefined || typeof parent.chatId !== "string") return 0;
      const known = depths.get(event.chatId);
      if (known !== undefined) return known;
      const depth = (depths.get(parent.chatId) ?? 0) + 1;
      if (depths.size >= MAX_TRACKED_CHATS) {
        const oldest = depths.keys().next().value;
        if (oldest !== undefined) depths.delete(oldest);
      }
      depths.set(event.chatId, depth);
      return depth;
    },
  };
}

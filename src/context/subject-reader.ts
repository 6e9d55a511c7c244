import {
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type MsgRequest,
  type StoredMsg,
} from "@nats-io/jetstream";

/** One stored message, as read back by stream sequence. */
export interface SubjectMessage {
  seq: number;
  subject: string;
  headers: { get(name: string): string } | undefined;
  data: Uint8Array;
}

/** Where the messages are: a stream and a subject filter in it (a literal subject, or one `*` token). */
export interface SubjectSource {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  filter: string;
}

/**
 * How many messages are fetched one by one (a get each) before a read switches to a consumer:
 * a session's subjects usually hold a few (a snapshot and the appends since), and a get is far
 * cheaper than creating, fetching from and deleting a consumer.
 */
const GETS_BEFORE_CONSUMER = 8;

/** How long one fetch of a consumer waits for more before the read ends. */
const FETCH_EXPIRES_MS = 5_000;

/**
 * The first and the last message stored under the filter (null when none is), asked at the same
 * time. Both are single message gets the server answers from its per-subject index: nothing here
 * costs more when the stream holds more sessions (a stream info with a subject filter did).
 */
export async function firstAndLast(
  source: SubjectSource,
): Promise<{ first: StoredMsg; last: StoredMsg } | null> {
  const [first, last] = await Promise.all([
    getMessage(source, { seq: 1, next_by_subj: source.filter }),
    getMessage(source, { last_by_subj: source.filter }),
  ]);
  return first === null || last === null ? null : { first, last };
}

/**
 * Every message under the filter from `first` up to `lastSeq`, oldest first: message by message
 * (each the next one under the filter), then, past a handful, through one consumer bounded by
 * `lastSeq`. A purge racing the read may leave fewer messages than `lastSeq` promised: the read
 * ends at what is there. Not retried here: the caller retries its whole read.
 */
export async function readFrom(
  source: SubjectSource,
  first: StoredMsg,
  lastSeq: number,
): Promise<SubjectMessage[]> {
  const messages: SubjectMessage[] = [fromStored(first)];
  let seq = first.seq;
  for (let gets = 0; seq < lastSeq && gets < GETS_BEFORE_CONSUMER; gets++) {
    const next = await getMessage(source, { seq: seq + 1, next_by_subj: source.filter });
    if (next === null) return messages;
    messages.push(fromStored(next));
    seq = next.seq;
  }
  if (seq < lastSeq) messages.push(...(await consume(source, seq + 1, lastSeq)));
  return messages;
}

/**
 * The header JetStream keeps with a message written with an expected last subject sequence: the
 * sequence of the message that was the subject's last when this one was stored, so nothing on the
 * subject lies between the two.
 */
const PREVIOUS_SEQ_HEADER = "Nats-Expected-Last-Subject-Sequence";

/**
 * Every message of a literal subject from `first` to `last`, oldest first. Each message a history
 * writes expects the subject's last sequence (see {@link PREVIOUS_SEQ_HEADER}), so the messages
 * between are found walking back from `last`, one get by sequence each, none for a subject of two
 * messages, and the walk ends where it reaches `first`. A message without that header, or a
 * link to a sequence that holds another subject's message (a purge raced the read), ends the
 * walk, and the subject is read forward instead ({@link readFrom}); so does a subject longer than
 * a handful of gets, through a consumer.
 */
export async function readBetween(
  source: SubjectSource,
  first: StoredMsg,
  last: StoredMsg,
): Promise<SubjectMessage[]> {
  const between: StoredMsg[] = [];
  let current = last;
  for (let gets = 0; gets < GETS_BEFORE_CONSUMER; gets++) {
    const previous = previousSeq(current);
    if (previous === first.seq)
      return [first, ...between.reverse(), last].map((message) => fromStored(message));
    if (previous === undefined || previous < first.seq) return readFrom(source, first, last.seq);
    const message = await getMessage(source, { seq: previous });
    if (message === null || message.subject !== source.filter) return readFrom(source, first, last.seq);
    between.push(message);
    current = message;
  }
  return [fromStored(first), ...(await consume(source, first.seq + 1, last.seq))];
}

/** The sequence {@link PREVIOUS_SEQ_HEADER} names, when the message carries a valid one. */
function previousSeq(message: StoredMsg): number | undefined {
  const value = message.header.get(PREVIOUS_SEQ_HEADER);
  if (value === "") return undefined;
  const seq = Number(value);
  return Number.isSafeInteger(seq) && seq >= 0 ? seq : undefined;
}

/** The messages under the filter from stream sequence `fromSeq` to `lastSeq`, through one ordered consumer. */
async function consume(source: SubjectSource, fromSeq: number, lastSeq: number): Promise<SubjectMessage[]> {
  const consumer = await source.js.consumers.get(source.stream, {
    filter_subjects: source.filter,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: fromSeq,
  });
  const messages: SubjectMessage[] = [];
  try {
    // Fetches that expire, not an endless consume: a purge racing this read may leave fewer
    // messages than the last sequence promised.
    for (let isDone = false; !isDone; ) {
      let fetched = 0;
      for await (const message of await consumer.fetch({ max_messages: 256, expires: FETCH_EXPIRES_MS })) {
        fetched += 1;
        messages.push({
          seq: message.seq,
          subject: message.subject,
          headers: message.headers,
          data: message.data,
        });
        if (message.seq >= lastSeq || message.info.pending === 0) {
          isDone = true;
          break;
        }
      }
      if (fetched === 0) isDone = true;
    }
  } finally {
    await consumer.delete().catch(() => {
      // Ephemeral and in memory: the server drops it after its inactivity threshold anyway.
    });
  }
  return messages;
}

/**
 * A message get through the JetStream API (the stream's leader answers, so a new owner never
 * reads a replica behind). `next_by_subj` is understood by nats-server 2.9 and later; the
 * client's type for this call leaves it out.
 */
function getMessage(
  source: SubjectSource,
  query: { last_by_subj: string } | { seq: number; next_by_subj?: string },
): Promise<StoredMsg | null> {
  return source.jsm.streams.getMessage(source.stream, query as MsgRequest);
}

export function fromStored(message: StoredMsg): SubjectMessage {
  return { seq: message.seq, subject: message.subject, headers: message.header, data: message.data };
}

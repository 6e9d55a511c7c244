import { jetstream } from "@nats-io/jetstream";
import { connect, headers } from "@nats-io/transport-node";
import { BATCH_HEADER, PART_HEADER, RECORD_HEADER } from "../../src/context/history-records.js";
import { NatsHistoryStore } from "../../src/context/nats-history-store.js";
import type { Message } from "../../src/llm/types.js";
import { nowMs } from "../support/clock.js";
import { interleave } from "../support/interleave.js";
import { type Row, ratioOf } from "../support/report.js";
import type { BenchSettings, SectionResult } from "../support/section.js";

/** Messages per append: about one chat of a few tool steps (as in the SQLite history section). */
const BATCH = 20;
const SESSIONS = 50;

function chatMessages(): Message[] {
  return Array.from({ length: BATCH }, (_, index) =>
    index % 2 === 0
      ? { role: "user" as const, content: "Please look up alpha, beta and gamma. ".repeat(5) }
      : { role: "assistant" as const, content: "Here is what I found. ".repeat(10) },
  );
}

/**
 * The JetStream history (`--history nats`): messages appended per second through
 * NatsContextHistory (one acknowledged publish per append, expecting the subject's last sequence)
 * vs raw nats.js publishes of the same bodies with the same headers and expectation, each awaited
 * in turn on both sides (a session's writes are sequential).
 */
export async function benchNatsHistory(settings: BenchSettings): Promise<SectionResult> {
  const connection = await connect({ servers: settings.natsUrl, name: "bench-nats-history" });
  const appends = settings.isQuick ? 100 : 500;
  const messages = chatMessages();
  const body = new TextEncoder().encode(JSON.stringify(messages));
  try {
    const prefix = `benchhistory${Date.now()}`;
    const store = await NatsHistoryStore.open(connection, { prefix });
    const histories = Array.from({ length: SESSIONS }, (_, index) => store.history("bench", `s${index}`));
    await Promise.all(histories.map((history) => history.restore()));
    const js = jetstream(connection);
    const lastSeqs = new Map<string, number>();

    const results = await interleave(
      {
        agentloop: async () => {
          const start = nowMs();
          for (let index = 0; index < appends; index++) await histories[index % SESSIONS]!.append(messages);
          return (appends * BATCH) / ((nowMs() - start) / 1000);
        },
        raw: async () => {
          const start = nowMs();
          for (let index = 0; index < appends; index++) {
            const subject = `${prefix}.history.raw.s${index % SESSIONS}`;
            const partHeaders = headers();
            partHeaders.set(RECORD_HEADER, "append");
            partHeaders.set(BATCH_HEADER, `b${index}`);
            partHeaders.set(PART_HEADER, "1/1");
            const ack = await js.publish(subject, body, {
              headers: partHeaders,
              expect: { streamName: store.stream, lastSubjectSequence: lastSeqs.get(subject) ?? 0 },
            });
            lastSeqs.set(subject, ack.seq);
          }
          return (appends * BATCH) / ((nowMs() - start) / 1000);
        },
      },
      { warmups: settings.warmups, runs: settings.runs },
    );
    const restoreStart = nowMs();
    const stored = (await store.history("bench", "s0").restore()).length;
    const restoreMs = nowMs() - restoreStart;
    const manager = await js.jetstreamManager();
    await manager.streams.delete(store.stream);

    const row: Row = {
      metric:
        "History on JetStream: messages appended/s, NatsContextHistory vs raw acknowledged publishes (same bodies, headers, expectation)",
      agentloop: results.agentloop,
      baseline: results.raw,
      unit: "msg/s",
      digits: 0,
    };
    return {
      title: "History on JetStream",
      rows: [row],
      targets: [
        {
          target: "JetStream history ≥ 50 % of raw acknowledged publishes",
          stands: `${(ratioOf(row) * 100).toFixed(0)} %`,
          met: ratioOf(row) >= 0.5,
        },
      ],
      notes: [
        `History on JetStream: ${appends.toLocaleString("en-US")} appends of ${BATCH} messages (${body.length.toLocaleString("en-US")} bytes of JSON each, one message per append) per run over ${SESSIONS} sessions, each publish awaited (its ack carries the sequence the next write expects); file storage on the bench's nats-server. Restoring one session of ${stored.toLocaleString("en-US")} messages (an ordered consumer over its subject) took ${restoreMs.toFixed(1)} ms.`,
      ],
    };
  } finally {
    await connection.close();
  }
}

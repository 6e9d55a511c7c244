import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { openAgentDatabase } from "../../src/context/agent-database.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import { pinDatabase, statement } from "../../src/context/sqlite-statements.js";
import type { Message } from "../../src/llm/types.js";
import { nowMs } from "../support/clock.js";
import { interleave } from "../support/interleave.js";
import { type Row, ratioOf } from "../support/report.js";
import type { BenchSettings, SectionResult } from "../support/section.js";

/** Messages per append: about one chat of a few tool steps. */
const BATCH = 20;
const SESSIONS = 50;

/** A chat's worth of messages: user, then assistant tool calls and tool results, then the answer. */
function chatMessages(): Message[] {
  const messages: Message[] = [{ role: "user", content: "Please look up alpha, beta and gamma. ".repeat(5) }];
  for (let step = 1; messages.length < BATCH - 1; step++) {
    messages.push({
      role: "assistant",
      content: "Looking it up. ".repeat(8),
      toolCalls: [{ id: `call_${step}`, name: "lookup", arguments: JSON.stringify({ key: `k${step}` }) }],
    });
    messages.push({
      role: "tool",
      toolCallId: `call_${step}`,
      toolName: "lookup",
      content: "value ".repeat(50),
    });
  }
  messages.push({ role: "assistant", content: "Here is what I found. ".repeat(10) });
  return messages;
}

/**
 * §5 history: messages appended per second through SqliteContextHistory (one transaction per
 * append, sessions sharing one database handle) vs raw better-sqlite3 on the same schema and
 * pragmas, one prepared insert per row in one transaction per batch, positions kept in memory.
 */
export async function benchHistory(settings: BenchSettings): Promise<SectionResult> {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-history-"));
  const batches = settings.isQuick ? 200 : 1_000;
  const messages = chatMessages();
  try {
    const database = openAgentDatabase(join(dir, "agentloop.db"));
    const histories = Array.from(
      { length: SESSIONS },
      (_, index) => new SqliteContextHistory({ agent: "bench", session: `s${index}`, database }),
    );

    const raw = pinDatabase(new Database(join(dir, "raw.db")));
    raw.exec("PRAGMA journal_mode = WAL");
    raw.exec("PRAGMA synchronous = NORMAL");
    raw.exec(
      "CREATE TABLE messages (agent TEXT NOT NULL, session TEXT NOT NULL, position INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (agent, session, position)) WITHOUT ROWID",
    );
    const insert = statement(
      raw,
      "INSERT INTO messages (agent, session, position, message) VALUES (?, ?, ?, ?)",
    );
    const positions = new Array<number>(SESSIONS).fill(0);
    const insertBatch = raw.transaction((session: number, batch: readonly Message[]) => {
      let position = positions[session]!;
      for (const message of batch) insert.run("bench", `s${session}`, position++, JSON.stringify(message));
      positions[session] = position;
    });

    const results = await interleave(
      {
        agentloop: async () => {
          const start = nowMs();
          for (let index = 0; index < batches; index++) await histories[index % SESSIONS]!.append(messages);
          return (batches * BATCH) / ((nowMs() - start) / 1000);
        },
        raw: async () => {
          const start = nowMs();
          for (let index = 0; index < batches; index++) insertBatch(index % SESSIONS, messages);
          return (batches * BATCH) / ((nowMs() - start) / 1000);
        },
      },
      { warmups: 1, runs: settings.runs },
    );
    const stored = (await histories[0]!.restore()).length;
    database.close();
    raw.close();

    const row: Row = {
      metric: "History: messages appended/s, SqliteContextHistory vs raw better-sqlite3 batched inserts",
      agentloop: results.agentloop,
      baseline: results.raw,
      unit: "msg/s",
      digits: 0,
    };
    const ratio = ratioOf(row);
    return {
      title: "History",
      rows: [row],
      targets: [
        {
          target: "history ≥ 50 % of raw inserts",
          stands: `${(ratio * 100).toFixed(0)} % (${Math.round(results.agentloop.median).toLocaleString("en-US")} vs ${Math.round(results.raw.median).toLocaleString("en-US")} msg/s)`,
          met: ratio >= 0.5,
        },
      ],
      notes: [
        `History: ${batches.toLocaleString("en-US")} appends of ${BATCH} messages (user, 9 tool calls with results, answer; about ${Math.round(JSON.stringify(messages).length / BATCH)} bytes of JSON each) per run, spread over ${SESSIONS} sessions; WAL, synchronous = NORMAL on both files (a temporary directory). A session read back ${stored.toLocaleString("en-US")} messages.`,
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

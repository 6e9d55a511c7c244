import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { pinDatabase, statement } from "../../src/context/sqlite-statements.js";
import {
  conversationText,
  type FakeProvider,
  HOSTED_PROVIDERS,
  runCli,
  startFakeProvider,
  textTurn,
} from "../support/cli.js";

/**
 * Over the wire: a model that streams half an emoji (the JSON escape
 * `\ud83d`, which the SDKs turn into a lone surrogate) used to have it stored and replayed on every
 * later request, and a real provider refuses such a body with a 400: the session was dead. Now
 * the history holds U+FFFD and the next process sends a well-formed request.
 */

/** How JSON writes a lone surrogate (a whole pair is written as the character itself). */
const LONE_SURROGATE_ESCAPE = /\\ud[89a-f][0-9a-f]{2}/i;

let fake: FakeProvider | undefined;
let directory: string | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
  if (directory) rmSync(directory, { recursive: true, force: true });
  directory = undefined;
});

function storedRows(path: string): string[] {
  const database = pinDatabase(new Database(path, { readonly: true }));
  try {
    return (
      statement(database, "SELECT message FROM messages ORDER BY position").all() as { message: string }[]
    ).map((row) => row.message);
  } finally {
    database.close();
  }
}

describe.each(HOSTED_PROVIDERS)("a lone surrogate from the model (--provider %s)", (provider) => {
  it("is stored as U+FFFD, and the next process's request is well-formed", async () => {
    directory = mkdtempSync(join(tmpdir(), "agentloop-well-formed-"));
    const db = join(directory, "history.db");
    fake = await startFakeProvider(provider, [textTurn("half ", "\ud83d", " an emoji 😀"), textTurn("fine")]);
    const chat = (text: string) =>
      runCli(["chat", "--local", ...fake!.flags, "--db", db, "--session", "s1", text], { env: fake!.env });

    expect(await chat("hello")).toMatchObject({ code: 0, stderr: "" });
    expect(await chat("again")).toMatchObject({ code: 0, stdout: "fine\n" });

    const [, second] = fake.bodies();
    expect(conversationText(second!)).not.toMatch(LONE_SURROGATE_ESCAPE);
    expect(conversationText(second!)).toContain("half \ufffd an emoji 😀");
    const rows = storedRows(db);
    expect(rows.length).toBeGreaterThanOrEqual(4);
    for (const row of rows) expect(row).not.toMatch(LONE_SURROGATE_ESCAPE);
  });
});

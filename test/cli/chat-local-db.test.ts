import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  conversationText,
  type FakeProvider,
  type HostedProvider,
  linesOf,
  runBinary,
  runCli,
  stackLines,
  startFakeProvider,
  textTurn,
} from "../support/cli.js";

/**
 * `chat --local --db F --session S` run twice in two processes continues the same
 * conversation: the second process restores the first one's exchange from the SQLite file.
 */

let fake: FakeProvider | undefined;
let directory: string | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
  if (directory) rmSync(directory, { recursive: true, force: true });
  directory = undefined;
});

describe("chat --local --db errors", () => {
  it("a --db path that cannot be opened → exit 2 (the user's mistake), one line naming the path", async () => {
    directory = mkdtempSync(join(tmpdir(), "agentloop-cli-db-"));
    fake = await startFakeProvider("anthropic", []);
    // A directory is not a database file.
    const run = await runCli(["chat", "--local", ...fake.flags, "--db", directory, "hi"], { env: fake.env });
    expect(run.code).toBe(2);
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: cannot open --db /);
    expect(run.stderr).toContain(directory);
    expect(stackLines(run.stderr)).toEqual([]);
    expect(fake.bodies()).toHaveLength(0);
  });
});

describe.each<HostedProvider>([
  "anthropic",
  "openai-responses",
])("chat --local --db (%s, two processes)", (provider) => {
  it("the second process continues the first one's conversation", async () => {
    directory = mkdtempSync(join(tmpdir(), "agentloop-cli-db-"));
    const db = join(directory, "history.db");
    fake = await startFakeProvider(provider, [
      textTurn("Nice to meet you, Ada."),
      textTurn("Your name is Ada."),
      textTurn("Who?"),
    ]);
    const args = ["chat", "--local", ...fake.flags, "--db", db, "--session", "s1"];

    const first = await runBinary([...args, "My name is Ada."], { env: fake.env });
    expect(first).toEqual({ code: 0, stdout: "Nice to meet you, Ada.\n", stderr: "" });
    const second = await runBinary([...args, "What is my name?"], { env: fake.env });
    expect(second).toEqual({ code: 0, stdout: "Your name is Ada.\n", stderr: "" });

    const bodies = fake.bodies();
    expect(bodies).toHaveLength(2);
    expect(conversationText(bodies[0]!)).not.toContain("Nice to meet you");
    const continued = conversationText(bodies[1]!);
    const order = ["My name is Ada.", "Nice to meet you, Ada.", "What is my name?"].map((text) =>
      continued.indexOf(text),
    );
    expect(order.every((index) => index >= 0)).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));

    // Another session in the same file starts empty.
    const other = await runBinary(
      ["chat", "--local", ...fake.flags, "--db", db, "--session", "s2", "Hello?"],
      { env: fake.env },
    );
    expect(other.code).toBe(0);
    const fresh = conversationText(fake.bodies()[2]!);
    expect(fresh).toContain("Hello?");
    expect(fresh).not.toContain("Ada");
  });
});

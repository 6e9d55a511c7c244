import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEventLogger, patternsOverlap } from "../../src/cli/commands/tail.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type CliRun, linesOf, runCli, stackLines } from "../support/cli.js";

/**
 * Regressions found by the black-box acceptance review: bad command-line input is a one-line
 * error with exit code 2, decided before any connection is attempted, and never a crash.
 */

/** Nothing listens here: a command that got as far as connecting would fail with exit 1. */
const UNREACHABLE_NATS = "nats://127.0.0.1:1";

let directory: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "agentloop-bad-input-"));
});

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

function expectUsageError(run: CliRun, message: RegExp): void {
  expect(run.code, run.stderr).toBe(2);
  expect(linesOf(run.stderr), run.stderr).toHaveLength(1);
  expect(run.stderr).toMatch(/^agentloop: /);
  expect(run.stderr).toMatch(message);
  expect(stackLines(run.stderr)).toEqual([]);
}

describe("tail --jsonl FILE that cannot be opened", () => {
  it("is a one-line usage error before connecting (it crashed on an unhandled stream 'error' event)", async () => {
    const missingDirectory = join(directory, "no-such-dir", "events.jsonl");
    expectUsageError(
      await runCli(["tail", "--nats", UNREACHABLE_NATS, "--jsonl", missingDirectory]),
      /--jsonl .*no-such-dir.*cannot open it for appending \(ENOENT/,
    );
    expectUsageError(
      await runCli(["tail", "--nats", UNREACHABLE_NATS, "--jsonl", directory]),
      /cannot open it for appending \(EISDIR/,
    );
  });
});

describe("the event logger with an event missing its kind's fields", () => {
  it("prints the event's JSON instead of throwing (a third party may publish on the event subjects)", () => {
    let text = "";
    const stdout = new Writable({
      write(chunk, _encoding, callback) {
        text += String(chunk);
        callback();
      },
    });
    const logger = createEventLogger({ stdout });
    const envelope = { agent: "bot", session: "s1", chatId: "c1", seq: 4, ts: "2026-01-01T12:00:00.000Z" };
    for (const kind of ["ToolCallStarted", "ChatFailed", "ModelResponse", "ChatCompleted"] as const) {
      const event = { ...envelope, iteration: 1, kind, extra: "kept" } as unknown as AgentEvent;
      expect(() => logger.write(event)).not.toThrow();
    }
    const lines = linesOf(text);
    expect(lines).toHaveLength(4);
    expect(lines[0]).toBe(
      '12:00:00.000 bot/s1 #4 i1 ToolCallStarted {"chatId":"c1","iteration":1,"extra":"kept"}',
    );
  });
});

describe("flags are checked before connecting", () => {
  it("serve --idle-timeout with a bad value is a usage error, not a NATS connection failure", async () => {
    expectUsageError(
      await runCli(["serve", "--nats", UNREACHABLE_NATS, "--idle-timeout", "soon"]),
      /--idle-timeout must be a duration/,
    );
  });

  it("up --idle-timeout with a bad value is a usage error before probing NATS", async () => {
    expectUsageError(
      await runCli(["up", "--nats", UNREACHABLE_NATS, "--idle-timeout", "0s"]),
      /--idle-timeout must be a duration/,
    );
  });

  it.each(["serve", "up"])("%s --quiet-gc with a bad value is a usage error", async (command) => {
    expectUsageError(
      await runCli([command, "--nats", UNREACHABLE_NATS, "--quiet-gc", "sometimes"]),
      /--quiet-gc must be a duration/,
    );
  });

  it.each(["serve", "up"])("%s --nats-hold-mb with a bad value is a usage error", async (command) => {
    expectUsageError(
      await runCli([command, "--nats", UNREACHABLE_NATS, "--nats-hold-mb", "lots"]),
      /--nats-hold-mb must be a positive integer, got "lots"/,
    );
  });
});

describe("commands that take no arguments", () => {
  it.each([
    ["viz", ["viz", "chat"]],
    ["serve", ["serve", "--nats", UNREACHABLE_NATS, "agents.json"]],
    ["up", ["up", "--nats", UNREACHABLE_NATS, "assistant"]],
    ["ui", ["ui", "--nats", UNREACHABLE_NATS, "8080"]],
  ])("%s refuses a stray argument instead of ignoring it", async (command, argv) => {
    expectUsageError(await runCli(argv), new RegExp(`${command} takes no arguments, got "${argv.at(-1)}"`));
  });
});

describe("tail --since with a FILTER outside the event log", () => {
  it("is a usage error naming the log (it was a cryptic JetStreamApiError after connecting)", async () => {
    expectUsageError(
      await runCli(["tail", "acme.events.>", "--since", "5m", "--nats", UNREACHABLE_NATS]),
      /--since replays the event log of agentloop\.events\.>, and FILTER "acme\.events\.>" lies outside it/,
    );
  });

  it("tells overlapping subject patterns apart from disjoint ones", () => {
    const log = "agentloop.events.>";
    for (const inside of [
      ">",
      "agentloop.>",
      "agentloop.events.*.s1.>",
      "*.events.bot.*.ChatCompleted",
      "agentloop.*.x.y",
    ]) {
      expect(patternsOverlap(inside, log), inside).toBe(true);
    }
    for (const outside of ["acme.>", "agentloop.agents.>", "agentloop.events", "agentloop", "*"]) {
      expect(patternsOverlap(outside, log), outside).toBe(false);
    }
  });
});

describe("up with a NATS URL it cannot use", () => {
  it("is a one-line configuration error with exit 2, without the BusConfigError class name", async () => {
    expectUsageError(
      await runCli(["up", "--nats", "http://127.0.0.1:4222"]),
      /^agentloop: unsupported NATS URL scheme "http"/,
    );
  });
});

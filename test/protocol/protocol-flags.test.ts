import { describe, expect, it } from "vitest";
import { linesOf, runCli, stackLines } from "../support/cli.js";

/** `--owner`, `--heartbeat`, `--keep-alive`, `--liveness-query`: bad values are one-line usage errors before NATS is tried. */

const UNREACHABLE_NATS = "nats://127.0.0.1:1";

describe("Agent Protocol flags", () => {
  it.each([
    [["--owner", "a.b"], /--owner must be one subject token/],
    [["--owner", "$sys"], /--owner must be one subject token/],
    [["--heartbeat", "soon"], /--heartbeat must be a duration/],
    [["--heartbeat", "0s"], /--heartbeat must be/],
    [["--keep-alive", "0s"], /--keep-alive must be/],
    [["--liveness-query", "0s"], /--liveness-query must be/],
    [["--liveness-query", "later"], /--liveness-query must be a duration/],
  ])("serve and up %j: a usage error", async (flags, message) => {
    for (const command of ["serve", "up"]) {
      const run = await runCli([command, "--nats", UNREACHABLE_NATS, ...flags]);
      expect(run.code, run.stderr).toBe(2);
      expect(linesOf(run.stderr)).toHaveLength(1);
      expect(run.stderr).toMatch(message);
      expect(stackLines(run.stderr)).toEqual([]);
    }
  });

  it("reads AGENTLOOP_OWNER too", async () => {
    const run = await runCli(["serve", "--nats", UNREACHABLE_NATS], { env: { AGENTLOOP_OWNER: "not ok" } });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--owner must be one subject token/);
  });
});

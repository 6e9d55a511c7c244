import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import {
  type CliRun,
  type FakeProvider,
  linesOf,
  providerError,
  runBinary,
  runCli,
  stackLines,
  startBinary,
  startFakeProvider,
  waitFor,
} from "../support/cli.js";

/** A failed run as the CLI contract wants it: non-zero exit, exactly one line on stderr, no trace. */
function expectOneLineFailure(run: CliRun, code: number, message: RegExp): void {
  expect(run.code).toBe(code);
  expect(linesOf(run.stderr), run.stderr).toHaveLength(1);
  expect(run.stderr).toMatch(/^agentloop: /);
  expect(run.stderr).toMatch(message);
  expect(run.stderr.endsWith("\n")).toBe(true);
  expect(stackLines(run.stderr)).toEqual([]);
}

describe("main: help and version", () => {
  it("--help prints the usage of every command and exits 0", async () => {
    const run = await runCli(["--help"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    // Each command with its line of what it does (`agentloop <command> --help` tells the rest).
    for (const command of ["up", "serve", "chat", "tail", "ui", "viz", "pending", "approve", "deny"]) {
      expect(run.stdout).toMatch(new RegExp(`^ {2}${command} +[A-Z]`, "m"));
    }
    expect(run.stdout).toContain("--provider anthropic|openai-chat|openai-responses|demo");
  });

  it("`help` and `chat -h` print the usage too", async () => {
    expect((await runCli(["help"])).code).toBe(0);
    const run = await runCli(["chat", "-h"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("agentloop chat");
  });

  it("no command prints the usage and exits 2", async () => {
    const run = await runCli([]);
    expect(run.code).toBe(2);
    expect(run.stdout).toContain("Usage: agentloop <command>");
  });

  it("--version prints the version of package.json", async () => {
    const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    const run = await runCli(["--version"]);
    expect(run).toEqual({ code: 0, stdout: `agentloop ${manifest.version}\n`, stderr: "" });
  });
});

describe("main: usage and configuration errors are one line on stderr", () => {
  it.each([
    ["unknown command", ["frobnicate"], /unknown command "frobnicate"/],
    ["unknown flag", ["chat", "--local", "--loud", "hi"], /unknown option --loud/],
    ["a flag of another command", ["viz", "--session", "s"], /unknown option --session/],
    ["flag without its value", ["chat", "--local", "hi", "--session"], /--session needs a value/],
    ["missing message", ["chat", "--local"], /chat needs a MESSAGE/],
    ["blank message", ["chat", "--local", "  "], /chat needs a MESSAGE/],
    [
      "bad --events",
      ["chat", "--local", "--events", "xml", "hi"],
      /--events must be jsonl, pretty or none, got "xml"/,
    ],
    [
      "--max-iterations 0",
      ["chat", "--local", "--max-iterations", "0", "hi"],
      /--max-iterations must be a positive integer/,
    ],
    [
      "--max-iterations abc",
      ["chat", "--local", "--max-iterations", "abc", "hi"],
      /--max-iterations must be a positive integer/,
    ],
    [
      "bad --reasoning-effort",
      ["chat", "--local", "--reasoning-effort", "max", "hi"],
      /--reasoning-effort must be low, medium or high/,
    ],
    [
      "bad --context-window",
      ["chat", "--local", "--context-window", "lots", "hi"],
      /--context-window must be a positive integer/,
    ],
    ["bad --provider", ["chat", "--local", "--provider", "gemini", "hi"], /unknown provider "gemini"/],
    ["invalid --session", ["chat", "--local", "--session", "a.b", "hi"], /--session must match/],
    [
      "invalid --session (spaces)",
      ["chat", "--local", "--session", "my session", "hi"],
      /--session must match/,
    ],
    ["invalid --agent", ["chat", "--local", "--agent", "x/y", "hi"], /--agent must match/],
  ])("%s → exit 2", async (_name, argv, message) => {
    const run = await runCli(argv);
    expectOneLineFailure(run, 2, message);
    expect(run.stdout).toBe("");
  });

  it("AGENTLOOP_PROVIDER with a bad value is refused the same way", async () => {
    const run = await runCli(["chat", "--local", "hi"], { env: { AGENTLOOP_PROVIDER: "nope" } });
    expectOneLineFailure(run, 2, /unknown provider "nope" \(from AGENTLOOP_PROVIDER\)/);
  });
});

describe("the agentloop binary (a real process)", () => {
  let fake: FakeProvider | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it("succeeds with exit 0 and the answer on stdout", async () => {
    fake = await startFakeProvider("openai-chat", [{ type: "turn", text: ["Hi ", "from the fake."] }]);
    const run = await runBinary(["chat", "--local", ...fake.flags, "hello"], { env: fake.env });
    expect(run).toEqual({ code: 0, stdout: "Hi from the fake.\n", stderr: "" });
  });

  it("an unknown command exits 2 with one line on stderr", async () => {
    const run = await runBinary(["frobnicate"]);
    expectOneLineFailure(run, 2, /unknown command "frobnicate"/);
  });

  it("anthropic without a key or a base URL is a configuration error (exit 2)", async () => {
    const run = await runBinary(["chat", "--local", "--provider", "anthropic", "hi"]);
    expectOneLineFailure(run, 2, /ANTHROPIC_API_KEY/);
    expect(run.stdout).toBe("");
  });

  it("openai without a key or a base URL is a configuration error (exit 2)", async () => {
    const run = await runBinary(["chat", "--local", "--provider", "openai-responses", "hi"]);
    expectOneLineFailure(run, 2, /OPENAI_API_KEY/);
  });

  it("SIGINT while the model is answering cancels the chat: exit 130, one line on stderr", async () => {
    fake = await startFakeProvider("anthropic", [{ type: "hang" }]);
    const running = startBinary(["chat", "--local", ...fake.flags, "hi"], { env: fake.env });
    const server = fake;
    // A fresh process loads the CLI before it asks: on a loaded machine that took over 10 s.
    await waitFor(() => server.bodies().length === 1, 60_000);
    running.child.kill("SIGINT");
    const run = await running.result;
    expectOneLineFailure(run, 130, /^agentloop: cancelled$/m);
    expect(run.stdout).toBe("");
  });

  it("a provider 401 exits 1 with one line on stderr", async () => {
    fake = await startFakeProvider("anthropic", [providerError("anthropic", 401, "invalid x-api-key")]);
    const run = await runBinary(["chat", "--local", ...fake.flags, "hi"], { env: fake.env });
    expectOneLineFailure(run, 1, /AuthenticationError: .*invalid x-api-key/);
    expect(run.stdout).toBe("");
  });
});

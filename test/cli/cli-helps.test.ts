import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { eventSubject } from "../../src/bus/subjects.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { linesOf, runBinary, runCli, stackLines, startBinary, waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * A CLI that helps a newcomer: per-command help (what it does, its flags with defaults, two
 * examples, nothing past 100 columns), "did you mean" for near misses, a busy port as one line
 * (exit 2), closed pipes ending quietly (exit 0), and `up` saying what it does on a signal.
 */

const COMMANDS = [
  "up",
  "serve",
  "chat",
  "tail",
  "ui",
  "sessions",
  "agents",
  "viz",
  "pending",
  "approve",
  "deny",
];

let nats: NatsServer;
let blocker: Server;
let busyPort: number;

beforeAll(async () => {
  nats = await workerNatsServer();
  blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
  busyPort = (blocker.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise((resolve) => blocker.close(resolve));
  await nats.stop();
});

describe("help", () => {
  it("every command's --help: a summary, usage and options within 100 columns, two examples", async () => {
    for (const command of COMMANDS) {
      const run = await runCli([command, "--help"]);
      expect({ command, code: run.code, stderr: run.stderr }).toEqual({ command, code: 0, stderr: "" });
      const lines = run.stdout.split("\n");
      expect(lines[0]).toMatch(new RegExp(`^agentloop ${command}: [A-Z].+\\.$`));
      expect(run.stdout).toContain(`Usage: agentloop ${command}`);
      expect(lines.filter((line) => line.length > 100)).toEqual([]);
      const examples = lines
        .slice(lines.indexOf("Examples:") + 1)
        .filter((line) => line.startsWith("  agentloop "));
      expect({ command, examples: examples.length }).toEqual({ command, examples: 2 });
    }
    const global = await runCli(["--help"]);
    expect(global.stdout.split("\n").filter((line) => line.length > 100)).toEqual([]);
    for (const command of COMMANDS) expect(global.stdout).toMatch(new RegExp(`^  ${command} +[A-Z]`, "m"));
  });

  it("options carry their defaults; up's usage names --host; `help chat` is `chat --help`", async () => {
    const up = await runCli(["up", "--help"]);
    expect(up.stdout).toMatch(/Usage: agentloop up \[--port N\] \[--host ADDR\]/);
    expect(up.stdout).toMatch(/^ {2}--port N +the UI's port \(default 4280; 0 picks a free one\)$/m);
    expect(up.stdout).toMatch(/^ {2}--idle-timeout D .*\n.*\(default 12h\)$/m);
    const chat = await runCli(["help", "chat"]);
    expect(chat.stdout).toBe((await runCli(["chat", "--help"])).stdout);
    expect(chat.stdout).toMatch(/^ {2}--agent NAME +the agent \(default assistant\)$/m);
  });

  it("did you mean: a near miss of a flag or a command is named", async () => {
    expect(await runCli(["chat", "--locl", "hi"])).toEqual({
      code: 2,
      stdout: "",
      stderr: "agentloop: unknown option --locl (did you mean --local?)\n",
    });
    const command = await runCli(["chta", "hi"]);
    expect(command.code).toBe(2);
    expect(command.stderr).toMatch(/^agentloop: unknown command "chta" \(did you mean chat\? commands: up, /);
    const far = await runCli(["chat", "--zzzzzz", "hi"]);
    expect(far.stderr).toBe("agentloop: unknown option --zzzzzz\n");
  });
});

describe("ports", () => {
  it("a busy port is one line and exit 2, for ui and up alike, before anything starts", async () => {
    for (const command of ["ui", "up"]) {
      const run = await runCli([command, "--port", String(busyPort), "--nats", "nats://127.0.0.1:1"]);
      expect({ command, ...run }).toEqual({
        command,
        code: 2,
        stdout: "",
        stderr: `agentloop: port ${busyPort} on 127.0.0.1 is in use (another agentloop?): pick another with --port N, or --port 0 for any free port\n`,
      });
    }
  });
});

describe("signals and pipes (the built binary)", () => {
  it("up says what it does on SIGTERM and exits 0", { timeout: 60_000 }, async () => {
    const running = startBinary(["up", "--port", "0", "--nats", nats.url, "--prefix", uniqueRoot()]);
    let stdout = "";
    running.child.stdout?.on("data", (text: string) => {
      stdout += text;
    });
    await waitFor(() => /agentloop up: bus /.test(stdout), 60_000);
    running.child.kill("SIGTERM");
    const run = await running.result;
    expect(run.code).toBe(0);
    expect(linesOf(run.stderr)).toEqual([
      "agentloop up: stopping: closing the UI, finishing running chats (signal again to cancel them)",
    ]);
  });

  it("tail whose reader went away (| head -1) ends quietly with exit 0", { timeout: 60_000 }, async () => {
    const prefix = uniqueRoot();
    const bus = await NatsBus.connect({ url: nats.url, name: "cli-helps-pipe" });
    try {
      const running = startBinary(["tail", "--nats", nats.url, "--prefix", prefix]);
      const { child } = running;
      let exited = false;
      child.once("exit", () => {
        exited = true;
      });
      let seen = "";
      child.stdout?.on("data", (text: string) => {
        seen += text;
        // The reader takes one line and goes away, as `head -1` does.
        child.stdout?.destroy();
      });
      let seq = 0;
      const publish = () =>
        bus.publish(
          eventSubject(prefix, "assistant", "pipe", "ModelTextDelta"),
          JSON.stringify({
            kind: "ModelTextDelta",
            agent: "assistant",
            session: "pipe",
            chatId: "c1",
            seq: ++seq,
            ts: new Date().toISOString(),
            iteration: 1,
            delta: "x".repeat(100),
          }),
        );
      // Published until tail notices its closed output (it subscribes a moment after starting).
      while (!exited) {
        publish();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const run = await running.result;
      expect(seen).not.toBe("");
      expect(run.code).toBe(0);
      expect(run.stderr).toBe("");
    } finally {
      await bus.close();
    }
  });

  it(
    "chat --local --events jsonl whose reader went away ends quietly with exit 0",
    { timeout: 60_000 },
    async () => {
      const running = startBinary(["chat", "--local", "--events", "jsonl", "make a plan for a trip"]);
      running.child.stdout?.once("data", () => running.child.stdout?.destroy());
      const run = await running.result;
      expect(run.code).toBe(0);
      expect(stackLines(run.stderr)).toEqual([]);
      expect(run.stderr).not.toMatch(/EPIPE/);
    },
  );

  it("--help through the binary prints and exits 0", async () => {
    const run = await runBinary(["pending", "--help"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^agentloop pending: /);
  });
});

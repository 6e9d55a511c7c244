import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, unlink, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import { EVERYTHING_SERVER, everythingWithPidFile, FILESYSTEM_SERVER, isAlive } from "../mcp/mcp-servers.js";
import {
  callableTools,
  type FakeProvider,
  type ProviderReply,
  startBinary,
  startFakeProvider,
  textTurn,
  toolResults,
  waitFor,
  withoutLoadNotices,
} from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * MCP tools, black-box: `agentloop serve --agents <file with mcpServers>` on a real
 * nats-server, a fake OpenAI model that calls `<server>__<tool>`, and real MCP servers from npm
 * (the reference "everything" server, the filesystem server confined to a temp dir).
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let fake: FakeProvider | undefined;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "mcp-tools-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-mcp-"));
});

afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

afterAll(async () => {
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

function call(id: string, name: string, args: Record<string, unknown>): ProviderReply {
  return turn({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] });
}

async function writeAgents(name: string, mcpServers: Record<string, unknown>): Promise<string> {
  const path = join(directory, name);
  await writeFile(path, JSON.stringify({ agents: [{ name: "assistant", tools: [], mcpServers }] }));
  return path;
}

async function ask(prefix: string, session: string, text: string): Promise<Record<string, unknown>> {
  const reply = await bus.request(chatSubject(prefix, "assistant"), JSON.stringify({ session, text }), {
    timeoutMs: 20_000,
  });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

function resultOf(body: Record<string, unknown> | undefined, callId: string): string {
  const found = toolResults("openai-chat", body ?? {}).find((result) => result.callId === callId);
  if (found === undefined) throw new Error(`no result for ${callId} in ${JSON.stringify(body)}`);
  return found.output;
}

async function readPid(pidFile: string): Promise<number> {
  return Number((await readFile(pidFile, "utf8")).trim());
}

describe("MCP tools through agentloop serve", () => {
  it("calls stdio servers' tools end to end, and no server process outlives serve", async () => {
    const sandbox = join(directory, "sandbox");
    await rm(sandbox, { recursive: true, force: true });
    await mkdir(sandbox);
    await writeFile(join(sandbox, "notes.txt"), "the secret word is plover\n");
    const files = {
      pidFile: join(directory, "e2e.pid"),
      blockFile: join(directory, "e2e.block"),
      attemptsFile: join(directory, "e2e.attempts"),
    };
    const path = await writeAgents("e2e.json", {
      everything: everythingWithPidFile(files),
      fs: { command: process.execPath, args: [FILESYSTEM_SERVER, sandbox] },
    });
    fake = await startFakeProvider("openai-chat", [
      turn({
        toolCalls: [
          {
            id: "c1",
            name: "fs__read_text_file",
            arguments: JSON.stringify({ path: join(sandbox, "notes.txt") }),
          },
          { id: "c2", name: "everything__echo", arguments: JSON.stringify({ message: "hi" }) },
          { id: "c3", name: "fs__read_text_file", arguments: JSON.stringify({ path: "/etc/passwd" }) },
          { id: "c4", name: "everything__get-env", arguments: "{}" },
        ],
      }),
      textTurn("The word is plover."),
    ]);
    const prefix = uniqueRoot();
    const serve = startServe(
      ["--nats", server.url, "--prefix", prefix, "--agents", path, ...fake.flags],
      fake.env,
    );
    let pid: number | undefined;
    try {
      await waitUntilServing(bus, prefix, serve);
      pid = await readPid(files.pidFile);
      expect(isAlive(pid)).toBe(true);
      expect(await ask(prefix, "s", "what is the word?")).toMatchObject({
        ok: true,
        result: "The word is plover.",
      });
    } finally {
      const run = await serve.stop();
      expect(run.code).toBe(0);
      expect(withoutLoadNotices(run.stderr)).toBe(
        "agentloop serve: stopping: finishing running chats (signal again to cancel them)\n",
      );
    }
    const [first, second] = fake.bodies();
    expect(callableTools("openai-chat", first ?? {})).toEqual(
      expect.arrayContaining([
        "everything__echo",
        "everything__get-env",
        "fs__read_text_file",
        "fs__list_directory",
      ]),
    );
    expect(resultOf(second, "c1")).toBe("the secret word is plover\n");
    expect(resultOf(second, "c2")).toBe("Echo: hi");
    // Confined to the temp dir: the server's refusal reaches the model as a tool error.
    expect(JSON.parse(resultOf(second, "c3"))).toEqual({ error: expect.stringMatching(/denied|outside/i) });
    // The server's environment holds none of the host's keys.
    const env = resultOf(second, "c4");
    expect(env).toContain('"PATH"');
    expect(env).not.toContain("OPENAI_API_KEY");
    await waitFor(() => pid !== undefined && !isAlive(pid));
  });

  it("the built binary ends its MCP server processes when it stops on SIGTERM", async () => {
    const files = {
      pidFile: join(directory, "binary.pid"),
      blockFile: join(directory, "binary.block"),
      attemptsFile: join(directory, "binary.attempts"),
    };
    const path = await writeAgents("binary.json", { everything: everythingWithPidFile(files) });
    fake = await startFakeProvider("openai-chat", []);
    const binary = startBinary(
      ["serve", "--nats", server.url, "--prefix", uniqueRoot(), "--agents", path, ...fake.flags],
      { env: fake.env },
    );
    let stdout = "";
    binary.child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    // The line is printed once the host has started, MCP servers included.
    await waitFor(() => stdout.includes("agentloop serve: bus"), 60_000);
    const pid = await readPid(files.pidFile);
    expect(isAlive(pid)).toBe(true);
    binary.child.kill("SIGTERM");
    const run = await binary.result;
    expect(run.code).toBe(0);
    await waitFor(() => !isAlive(pid));
  });

  it("a killed server's calls are tool errors; it is restarted with backoff and works again", async () => {
    const files = {
      pidFile: join(directory, "crash.pid"),
      blockFile: join(directory, "crash.block"),
      attemptsFile: join(directory, "crash.attempts"),
    };
    const path = await writeAgents("crash.json", { everything: everythingWithPidFile(files) });
    fake = await startFakeProvider("openai-chat", [
      call("c1", "everything__echo", { message: "one" }),
      textTurn("first"),
      call("c2", "everything__echo", { message: "two" }),
      textTurn("second"),
      call("c3", "everything__echo", { message: "three" }),
      textTurn("third"),
    ]);
    const prefix = uniqueRoot();
    const serve = startServe(
      ["--nats", server.url, "--prefix", prefix, "--agents", path, ...fake.flags],
      fake.env,
    );
    let stderr = "";
    let lastPid: number | undefined;
    try {
      await waitUntilServing(bus, prefix, serve);
      expect(await ask(prefix, "s", "one")).toMatchObject({ ok: true, result: "first" });

      // Kill it, and keep it from coming back until the test says so.
      await writeFile(files.blockFile, "");
      const firstPid = await readPid(files.pidFile);
      await unlink(files.pidFile);
      process.kill(firstPid, "SIGKILL");
      // Two failed restarts: the host keeps trying (0.5 s, then 1 s later).
      await waitFor(() => existsSync(files.attemptsFile) && readAttempts(files.attemptsFile) >= 2, 60_000);
      expect(await ask(prefix, "s", "two")).toMatchObject({ ok: true, result: "second" });

      await unlink(files.blockFile);
      await waitFor(() => existsSync(files.pidFile), 60_000);
      lastPid = await readPid(files.pidFile);
      expect(lastPid).not.toBe(firstPid);
      expect(await ask(prefix, "s", "three")).toMatchObject({ ok: true, result: "third" });
    } finally {
      const run = await serve.stop();
      expect(run.code).toBe(0);
      stderr = run.stderr;
    }
    const bodies = fake.bodies();
    expect(resultOf(bodies[1], "c1")).toBe("Echo: one");
    expect(JSON.parse(resultOf(bodies[3], "c2"))).toEqual({
      error: expect.stringMatching(/^MCP server everything is not running: /),
    });
    expect(resultOf(bodies[5], "c3")).toBe("Echo: three");
    expect(stderr).toMatch(/MCP server everything stopped: the process exited.*; retrying in 0\.5 s/);
    expect(stderr).toContain("MCP server everything: running again");
    await waitFor(() => lastPid !== undefined && !isAlive(lastPid));
  });

  it("calls a Streamable HTTP server's tools, and reconnects when the server comes back", async () => {
    const port = await freePort();
    let web = await startEverythingHttp(port);
    try {
      const path = await writeAgents("http.json", { web: { url: `http://127.0.0.1:${port}/mcp` } });
      fake = await startFakeProvider("openai-chat", [
        call("c1", "web__echo", { message: "over http" }),
        textTurn("first"),
        call("c2", "web__echo", { message: "nobody there" }),
        textTurn("second"),
        call("c3", "web__echo", { message: "back again" }),
        textTurn("third"),
      ]);
      const prefix = uniqueRoot();
      const serve = startServe(
        ["--nats", server.url, "--prefix", prefix, "--agents", path, ...fake.flags],
        fake.env,
      );
      try {
        await waitUntilServing(bus, prefix, serve);
        expect(await ask(prefix, "s", "one")).toMatchObject({ ok: true, result: "first" });
        await web.stop();
        expect(await ask(prefix, "s", "two")).toMatchObject({ ok: true, result: "second" });
        web = await startEverythingHttp(port);
        // The host's retry opens a new MCP session with the new server.
        await waitFor(() => web.sessions() > 0, 60_000);
        expect(await ask(prefix, "s", "three")).toMatchObject({ ok: true, result: "third" });
      } finally {
        expect((await serve.stop()).code).toBe(0);
      }
      const bodies = fake.bodies();
      expect(callableTools("openai-chat", bodies[0] ?? {})).toContain("web__echo");
      expect(resultOf(bodies[1], "c1")).toBe("Echo: over http");
      expect(JSON.parse(resultOf(bodies[3], "c2"))).toEqual({
        error: expect.stringMatching(/^MCP server web is not running: /),
      });
      expect(resultOf(bodies[5], "c3")).toBe("Echo: back again");
    } finally {
      await web.stop();
    }
  });
});

function readAttempts(path: string): number {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "").length;
}

/** The "everything" server in its Streamable HTTP mode on a free port, as a child process. */
async function startEverythingHttp(port: number): Promise<{ sessions(): number; stop(): Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [EVERYTHING_SERVER, "streamableHttp"], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout?.setEncoding("utf8").on("data", (text: string) => {
    stdout += text;
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (text: string) => {
    stderr += text;
  });
  await waitFor(() => stderr.includes("listening on port"), 60_000);
  return {
    sessions: () => stdout.split("Session initialized").length - 1,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("close", () => resolve());
        child.kill("SIGKILL");
      }),
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

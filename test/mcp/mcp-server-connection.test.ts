import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { McpServerNotRunningError } from "../../src/mcp/mcp-errors.js";
import { McpServerConnection, serverEnvironment } from "../../src/mcp/mcp-server-connection.js";
import { toMcpToolOutput } from "../../src/mcp/mcp-tool-result.js";
import { waitFor } from "../support/cli.js";
import { everythingStdio, isAlive } from "./mcp-servers.js";

/** The connection to one MCP server, against the real "everything" server on stdio. */

const connections: McpServerConnection[] = [];
afterEach(async () => {
  await Promise.all(connections.splice(0).map((connection) => connection.close()));
});

function connect(options: ConstructorParameters<typeof McpServerConnection>[0]): McpServerConnection {
  const connection = new McpServerConnection(options);
  connections.push(connection);
  return connection;
}

const signal = new AbortController().signal;

/** A restart scheduler that runs nothing until the test says so, recording each delay asked for. */
function manualSchedule() {
  const delays: number[] = [];
  let pending: (() => void) | undefined;
  return {
    delays,
    schedule: (run: () => void, delayMs: number) => {
      delays.push(delayMs);
      pending = run;
      return () => {
        pending = undefined;
      };
    },
    runPending() {
      const run = pending;
      pending = undefined;
      if (run === undefined) throw new Error("no restart is scheduled");
      run();
    },
  };
}

describe("McpServerConnection", () => {
  it("starts the server, lists its tools and calls one", async () => {
    const connection = connect({ name: "everything", config: everythingStdio() });
    await connection.start();
    expect(connection.state).toBe("running");
    expect(connection.tools.map((tool) => tool.name)).toContain("echo");
    const echo = connection.tools.find((tool) => tool.name === "echo");
    expect(echo?.inputSchema).toMatchObject({ type: "object", properties: { message: { type: "string" } } });
    const result = await connection.callTool("echo", { message: "hello" }, signal);
    expect(toMcpToolOutput(result)).toEqual({ text: "Echo: hello", images: [], isError: false });
  });

  it("gives a stdio server only PATH, HOME, the locale and its listed env, never the host's keys", async () => {
    const hostEnv = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: "/home/test",
      OPENAI_API_KEY: "sk-secret",
    };
    expect(serverEnvironment(hostEnv, { GREETING: "hi" })).toEqual({
      PATH: hostEnv.PATH,
      HOME: "/home/test",
      GREETING: "hi",
    });
    const connection = connect({
      name: "everything",
      config: everythingStdio({ GREETING: "hi" }),
      env: hostEnv,
    });
    await connection.start();
    const { text } = toMcpToolOutput(await connection.callTool("get-env", {}, signal));
    const seen = JSON.parse(text) as Record<string, string>;
    expect(seen.GREETING).toBe("hi");
    expect(seen.HOME).toBe("/home/test");
    expect(text).not.toContain("sk-secret");
    expect(seen.OPENAI_API_KEY).toBeUndefined();
  });

  it("a server that cannot start is logged once and retried with exponential backoff, capped", async () => {
    const lines: string[] = [];
    const timer = manualSchedule();
    const connection = connect({
      name: "broken",
      config: { command: process.execPath, args: ["-e", "console.error('no config'); process.exit(3)"] },
      log: (line) => lines.push(line),
      schedule: timer.schedule,
      initialRestartDelayMs: 500,
      maxRestartDelayMs: 4_000,
    });
    await connection.start();
    for (let attempt = 0; attempt < 5; attempt += 1) {
      expect(connection.state).toBe("waiting");
      const attempts = timer.delays.length;
      timer.runPending();
      await waitFor(() => timer.delays.length > attempts);
    }
    expect(timer.delays).toEqual([500, 1_000, 2_000, 4_000, 4_000, 4_000]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^MCP server broken cannot start: the process exited \(last stderr line: no config\); retrying in 0\.5 s, backing off to 4 s$/,
    );
    const call = connection.callTool("anything", {}, signal);
    await expect(call).rejects.toBeInstanceOf(McpServerNotRunningError);
    await expect(call).rejects.toThrow(/^MCP server broken is not running: cannot start/);
  });

  it("names a command that does not exist", async () => {
    const lines: string[] = [];
    const connection = connect({
      name: "missing",
      config: { command: "/nonexistent/mcp-server" },
      log: (line) => lines.push(line),
      schedule: manualSchedule().schedule,
    });
    await connection.start();
    expect(lines).toEqual([
      expect.stringMatching(
        /^MCP server missing cannot start: command not found: \/nonexistent\/mcp-server;/,
      ),
    ]);
  });

  it("follows the server's tool list when it changes", async () => {
    const script = fileURLToPath(new URL("../fixtures/mcp/growing-server.mjs", import.meta.url));
    const connection = connect({ name: "growing", config: { command: process.execPath, args: [script] } });
    await connection.start();
    expect(connection.tools.map((tool) => tool.name)).toEqual(["grow"]);
    await connection.callTool("grow", {}, signal);
    await waitFor(() => connection.tools.some((tool) => tool.name === "grown_1"));
    const result = await connection.callTool("grown_1", { word: "hi" }, signal);
    expect(toMcpToolOutput(result).text).toBe("grown_1 says hi");
  });

  it("names a working directory that does not exist", async () => {
    const lines: string[] = [];
    const connection = connect({
      name: "lost",
      config: { ...everythingStdio(), cwd: "/nonexistent/dir" },
      log: (line) => lines.push(line),
      schedule: manualSchedule().schedule,
    });
    await connection.start();
    expect(lines).toEqual([
      expect.stringMatching(
        /^MCP server lost cannot start: working directory not found: \/nonexistent\/dir;/,
      ),
    ]);
  });

  it("a killed server fails calls with 'not running', is restarted, and works again", async () => {
    const lines: string[] = [];
    const timer = manualSchedule();
    const connection = connect({
      name: "everything",
      config: everythingStdio(),
      log: (line) => lines.push(line),
      schedule: timer.schedule,
    });
    await connection.start();
    const firstPid = connection.pid;
    expect(firstPid).toBeTypeOf("number");
    process.kill(firstPid as number, "SIGKILL");
    await waitFor(() => connection.state === "waiting");
    await expect(connection.callTool("echo", { message: "x" }, signal)).rejects.toThrow(
      /^MCP server everything is not running: stopped: the process exited/,
    );
    // The tools stay listed, so the model's call reaches the server's ToolSet and gets that error.
    expect(connection.tools.map((tool) => tool.name)).toContain("echo");
    expect(timer.delays).toEqual([500]);
    timer.runPending();
    await waitFor(() => connection.state === "running");
    expect(connection.pid).not.toBe(firstPid);
    expect(toMcpToolOutput(await connection.callTool("echo", { message: "back" }, signal)).text).toBe(
      "Echo: back",
    );
    expect(lines).toEqual([
      expect.stringMatching(/^MCP server everything stopped: the process exited.*; retrying in 0\.5 s/),
      "MCP server everything: running again (" + connection.tools.length + " tools)",
    ]);
  });

  it("backs off further when a restarted server dies again soon, and starts over once it stayed up", async () => {
    const timer = manualSchedule();
    let now = 0;
    const connection = connect({
      name: "everything",
      config: everythingStdio(),
      schedule: timer.schedule,
      log: () => {},
      stableAfterMs: 60_000,
      now: () => now,
    });
    await connection.start();
    const killAndRestart = async () => {
      process.kill(connection.pid as number, "SIGKILL");
      await waitFor(() => connection.state === "waiting");
      timer.runPending();
      await waitFor(() => connection.state === "running");
    };
    await killAndRestart();
    now += 1_000;
    await killAndRestart();
    now += 60_000;
    await killAndRestart();
    expect(timer.delays).toEqual([500, 1_000, 500]);
  });

  it("close ends the server process", async () => {
    const connection = connect({ name: "everything", config: everythingStdio() });
    await connection.start();
    const pid = connection.pid as number;
    expect(isAlive(pid)).toBe(true);
    await connection.close();
    expect(connection.state).toBe("closed");
    await waitFor(() => !isAlive(pid));
    await expect(connection.callTool("echo", { message: "x" }, signal)).rejects.toThrow(
      "MCP server everything is not running: the host is shutting down",
    );
  });

  it("close cancels a pending restart", async () => {
    const timer = manualSchedule();
    const connection = connect({
      name: "everything",
      config: everythingStdio(),
      schedule: timer.schedule,
      log: () => {},
    });
    await connection.start();
    process.kill(connection.pid as number, "SIGKILL");
    await waitFor(() => connection.state === "waiting");
    await connection.close();
    expect(() => timer.runPending()).toThrow("no restart is scheduled");
    expect(connection.state).toBe("closed");
  });
});

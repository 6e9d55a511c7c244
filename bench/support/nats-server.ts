import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect as connectTcp, createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

/** A nats-server of the bench's own, on a free local port with a temporary JetStream dir. */
export interface BenchNatsServer {
  url: string;
  /** The server's process id (for its CPU and memory figures). */
  pid: number | undefined;
  /** `http://127.0.0.1:<port>` of its monitoring endpoints (`/varz`, `/jsz`), when asked for. */
  monitorUrl: string | undefined;
  stop(): Promise<void>;
}

const FALLBACK_BINARY = "/usr/sbin/nats-server";

/** The nats-server binary: on PATH, else Debian's location. Throws a clear error when missing. */
export function findNatsServer(): string {
  const candidates = (process.env.PATH ?? "")
    .split(delimiter)
    .filter((dir) => dir !== "")
    .map((dir) => join(dir, "nats-server"));
  candidates.push(FALLBACK_BINARY);
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here; try the next one.
    }
  }
  throw new Error(`nats-server not found on PATH or at ${FALLBACK_BINARY}: the bus benchmarks need it`);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connectTcp({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * Starts a private nats-server (JetStream on, `-sd` a temporary directory) so the measurements
 * share no server with anything else, and waits until it accepts connections.
 */
export async function startNatsServer(options: { isMonitored?: boolean } = {}): Promise<BenchNatsServer> {
  const binary = findNatsServer();
  const port = await freePort();
  const monitorPort = options.isMonitored === true ? await freePort() : undefined;
  const storeDir = await mkdtemp(join(tmpdir(), "agentloop-bench-nats-"));
  const args = ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir];
  if (monitorPort !== undefined) args.push("-m", String(monitorPort));
  const child: ChildProcess = spawn(binary, args, {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
    await rm(storeDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 10_000;
  while (!(await canConnect(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`nats-server did not start on port ${port}: ${stderr.trim().slice(-500)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    pid: child.pid,
    monitorUrl: monitorPort === undefined ? undefined : `http://127.0.0.1:${monitorPort}`,
    stop,
  };
}

import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

/** A nats-server for tests: a private one on a free port, or the one `NATS_URL` names. */
export interface NatsServer {
  /** e.g. `nats://127.0.0.1:PORT` */
  url: string;
  /** The JetStream store directory ("" when using `NATS_URL`). */
  storeDir: string;
  /** Kills the server and removes its store (a no-op for `NATS_URL`). */
  stop(): Promise<void>;
}

export interface StartNatsServerOptions {
  /** Extra command-line arguments, e.g. `["--user", "a", "--pass", "b"]` for auth tests. */
  args?: string[];
  /** Ignore `NATS_URL` and always start a private server (auth tests need their own). */
  isPrivate?: boolean;
  /** `false`: a server without JetStream (always private). */
  jetStream?: boolean;
}

const FALLBACK_BINARY = "/usr/sbin/nats-server";
const READY_TIMEOUT_MS = 10_000;
const PORT_ATTEMPTS = 3;

/**
 * Starts `nats-server -a 127.0.0.1 -p PORT -js -sd TMPDIR` and waits until it accepts
 * connections. With `NATS_URL` set (and `isPrivate` unset) returns that server instead.
 *
 * @throws Error when no nats-server binary exists: integration tests fail loudly, never skip.
 */
export async function startNatsServer(options: StartNatsServerOptions = {}): Promise<NatsServer> {
  const external = process.env.NATS_URL;
  if (
    external !== undefined &&
    external !== "" &&
    options.isPrivate !== true &&
    options.jetStream !== false
  ) {
    return { url: external, storeDir: "", stop: async () => {} };
  }
  const binary = findNatsServerBinary();
  let lastError: unknown;
  // The free port can be taken between probing and binding: try a fresh one.
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const storeDir = await mkdtemp(join(tmpdir(), "agentloop-nats-"));
    try {
      return await launch(binary, await findFreePort(), storeDir, options.args ?? [], {
        jetStream: options.jetStream !== false,
      });
    } catch (error) {
      lastError = error;
      await rm(storeDir, { recursive: true, force: true });
    }
  }
  throw lastError;
}

/**
 * The nats-server of the vitest worker slot this test file runs in (JetStream on): one of those the
 * global setup started, picked by `VITEST_POOL_ID`, so files running at the same time never share
 * a server. Without the global setup (a file run by other means) it starts a private one. `stop()`
 * stops only a server started here; the global setup stops its own at the end of the run.
 */
export async function workerNatsServer(): Promise<NatsServer> {
  // Imported here, not at the top: the global setup loads this file outside any test worker.
  const { inject } = await import("vitest");
  const urls = inject("natsUrls");
  if (urls === undefined || urls.length === 0) return startNatsServer();
  const slot = Number(process.env.VITEST_POOL_ID ?? "1");
  const url = urls[slot - 1];
  if (url === undefined) {
    throw new Error(
      `vitest worker slot ${slot} has no nats-server: the global setup started ${urls.length}, one per worker`,
    );
  }
  return { url, storeDir: "", stop: async () => {} };
}

/** A private nats-server that a test can kill and bring back (reconnect tests). */
export interface RestartableNatsServer extends NatsServer {
  /** SIGKILLs the server (no clean shutdown, like a crash) and resolves once it has exited. */
  kill(): Promise<void>;
  /** Starts it again on the same port with the same JetStream store; resolves once it accepts. */
  restart(): Promise<void>;
  /**
   * SIGSTOPs the server: its sockets stay open but nothing is read or answered, so what a client
   * sends now is in flight when the server is then killed (a write whose acknowledgement is lost).
   */
  freeze(): void;
}

/**
 * Starts a private `nats-server -js` (never the one `NATS_URL` names: killing a shared server
 * would break other tests) that can be killed and restarted on the same port and store.
 */
export async function startRestartableNatsServer(
  options: Omit<StartNatsServerOptions, "isPrivate"> = {},
): Promise<RestartableNatsServer> {
  const args = options.args ?? [];
  const binary = findNatsServerBinary();
  let current = await startNatsServer({ ...options, isPrivate: true });
  const port = Number(new URL(current.url).port);
  let running: SpawnedServer | undefined = spawnedServers.get(current);
  return {
    url: current.url,
    storeDir: current.storeDir,
    async kill() {
      if (running === undefined) return;
      const { child, forget } = running;
      running = undefined;
      forget();
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGKILL");
      await exited;
    },
    freeze() {
      running?.child.kill("SIGSTOP");
    },
    async restart() {
      if (running !== undefined) throw new Error("the nats-server is still running: kill() it first");
      current = await launch(binary, port, current.storeDir, args, { keepStore: true });
      running = spawnedServers.get(current);
    },
    // After a kill, the store is still there to remove.
    stop: () =>
      running === undefined ? rm(current.storeDir, { recursive: true, force: true }) : current.stop(),
  };
}

/** `nats-server` on PATH, else Debian's `/usr/sbin/nats-server`. */
export function findNatsServerBinary(): string {
  const candidates = (process.env.PATH ?? "")
    .split(delimiter)
    .filter((directory) => directory !== "")
    .map((directory) => join(directory, "nats-server"));
  candidates.push(FALLBACK_BINARY);
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here: try the next one.
    }
  }
  throw new Error(
    [
      "",
      "=================================================================",
      " nats-server NOT FOUND: the NATS integration tests cannot run.",
      ` Looked on PATH and at ${FALLBACK_BINARY}.`,
      " Install it (Debian/Ubuntu: `apt-get install nats-server`), or",
      " point NATS_URL at a running nats-server with JetStream enabled.",
      "=================================================================",
    ].join("\n"),
  );
}

function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** The process behind a server `launch` started, and how to stop killing it at exit. */
interface SpawnedServer {
  child: ChildProcess;
  forget(): void;
}

/** What {@link startRestartableNatsServer} needs to kill a server `launch` started. */
const spawnedServers = new WeakMap<NatsServer, SpawnedServer>();

async function launch(
  binary: string,
  port: number,
  storeDir: string,
  args: string[],
  options: { keepStore?: boolean; jetStream?: boolean } = {},
): Promise<NatsServer> {
  const jetStream = options.jetStream === false ? [] : ["-js", "-sd", storeDir];
  const child = spawn(binary, ["-a", "127.0.0.1", "-p", String(port), ...jetStream, ...args], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  // Keep the tail of the log for error messages; never print it.
  let log = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    log = (log + chunk).slice(-4000);
  });
  // A spawn failure arrives as an "error" event, which would otherwise crash the test process.
  let hasExited = false;
  child.once("error", (error) => {
    hasExited = true;
    log += `\n${error.message}`;
  });
  child.once("exit", () => {
    hasExited = true;
  });
  const killOnExit = (): void => {
    child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);

  const stop = async (): Promise<void> => {
    process.removeListener("exit", killOnExit);
    await terminate(child);
    await rm(storeDir, { recursive: true, force: true });
  };

  try {
    await waitUntilAccepting(
      port,
      () => hasExited,
      () => log,
    );
  } catch (error) {
    if (options.keepStore === true) {
      process.removeListener("exit", killOnExit);
      await terminate(child);
    } else await stop();
    throw error;
  }
  const server = { url: `nats://127.0.0.1:${port}`, storeDir, stop };
  spawnedServers.set(server, { child, forget: () => process.removeListener("exit", killOnExit) });
  return server;
}

async function waitUntilAccepting(port: number, hasExited: () => boolean, log: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (true) {
    if (hasExited()) {
      throw new Error(`nats-server exited during start-up (port ${port}):\n${log()}`);
    }
    if (await canConnect(port)) return;
    if (Date.now() > deadline) {
      throw new Error(
        `nats-server did not accept connections on port ${port} within ${READY_TIMEOUT_MS} ms:\n${log()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}

/** Private nats-servers routed into one JetStream cluster. */
export interface NatsCluster {
  /** Each server's client URL. */
  urls: string[];
  /** The client URLs comma-separated: what `NATS_URL` / `--nats` take for a cluster. */
  url: string;
  /** Stops every server and removes their stores. */
  stop(): Promise<void>;
}

/**
 * Starts `size` private `nats-server -js` processes with `--cluster_name`, each with a cluster
 * port and routes to the others (as docker-compose.yml runs them). Resolves once they accept
 * clients; the JetStream meta group may still be electing its leader then, so a test waits for
 * JetStream to answer before it creates streams.
 */
export async function startNatsCluster(size = 3, name = "agentloop-test"): Promise<NatsCluster> {
  const binary = findNatsServerBinary();
  const clusterPorts: number[] = [];
  while (clusterPorts.length < size) {
    const port = await findFreePort();
    if (!clusterPorts.includes(port)) clusterPorts.push(port);
  }
  const routes = clusterPorts.map((port) => `nats://127.0.0.1:${port}`);
  const servers: NatsServer[] = [];
  try {
    for (let index = 0; index < size; index++) {
      const storeDir = await mkdtemp(join(tmpdir(), "agentloop-nats-cluster-"));
      const args = [
        "-n",
        `${name}-${index + 1}`,
        "--cluster_name",
        name,
        "--cluster",
        routes[index]!,
        "--routes",
        routes.filter((_, other) => other !== index).join(","),
      ];
      servers.push(await launch(binary, await findFreePort(), storeDir, args));
    }
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()));
    throw error;
  }
  const urls = servers.map((server) => server.url);
  return {
    urls,
    url: urls.join(","),
    stop: async () => {
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { NatsBus } from "../../src/bus/nats-bus.js";
import { hostSubject } from "../../src/cluster/session-cluster.js";

/** The built CLI every host runs (`npm run scale` builds it first). */
export const BIN_PATH = join(packageRoot(), "dist/src/cli/bin.js");

/** The directory of agentloop's package.json (this file runs from bench/scale or dist/bench/scale). */
function packageRoot(): string {
  let directory = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(directory, "package.json")) && dirname(directory) !== directory) {
    directory = dirname(directory);
  }
  return directory;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One `agentloop serve` process of the run. */
export interface ScaleHost {
  id: string;
  child: ChildProcess;
  /** The last few KB of its stdout and stderr, for an error message. */
  output(): string;
  /** The last lines where it spoke of its own lease (a slow renewal, a lapse). */
  leaseNotices(): string[];
  isRunning(): boolean;
}

export interface HostSettings {
  natsUrl: string;
  prefix: string;
  agentsFile: string;
  directory: string;
  env: Record<string, string>;
  extraArgs: readonly string[];
  /** Options for node itself, before the CLI (e.g. `--import` of a probe). */
  nodeArgs?: readonly string[];
  /** The CLI the hosts run (default {@link BIN_PATH}: this tree's build), e.g. another build to compare with. */
  binPath?: string;
}

const OUTPUT_TAIL = 4_000;
/** How many of a host's notices about its own lease are kept. */
const LEASE_LINES = 20;

/**
 * Starts and tracks the `serve` processes; {@link killAll} (also run on Ctrl-C and at exit) kills
 * every one still running, so no host outlives the run.
 */
export class ScaleHosts {
  readonly #settings: HostSettings;
  readonly #hosts = new Map<string, ScaleHost>();

  constructor(settings: HostSettings) {
    this.#settings = settings;
  }

  start(id: string): ScaleHost {
    const {
      natsUrl,
      prefix,
      agentsFile,
      directory,
      env,
      extraArgs,
      nodeArgs = [],
      binPath = BIN_PATH,
    } = this.#settings;
    const child = spawn(
      process.execPath,
      [
        ...nodeArgs,
        binPath,
        "serve",
        ...["--nats", natsUrl, "--prefix", prefix, "--agents", agentsFile, "--history", "nats"],
        ...["--host-id", id, "--db", join(directory, `${id}.db`), ...extraArgs],
      ],
      {
        cwd: directory,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    const leaseLines: string[] = [];
    const keep = (text: string) => {
      output = (output + text).slice(-OUTPUT_TAIL);
      // What the host said about its own lease (slow renewals, a lapse): kept apart, since a
      // lapse is followed by a line per stopped session that would push it out of the tail.
      for (const line of text.split("\n")) {
        if (line.includes("this host's lease")) leaseLines.push(line.slice(0, 600));
      }
      leaseLines.splice(0, Math.max(0, leaseLines.length - LEASE_LINES));
    };
    child.stdout?.setEncoding("utf8").on("data", keep);
    child.stderr?.setEncoding("utf8").on("data", keep);
    const host: ScaleHost = {
      id,
      child,
      output: () => output,
      leaseNotices: () => [...leaseLines],
      isRunning: () => child.exitCode === null && child.signalCode === null,
    };
    this.#hosts.set(id, host);
    return host;
  }

  running(): ScaleHost[] {
    return [...this.#hosts.values()].filter((host) => host.isRunning());
  }

  /** Sends SIGTERM (a graceful leave: the host hands its shards over) and waits for the exit. */
  async stop(host: ScaleHost, timeoutMs = 60_000): Promise<void> {
    if (!host.isRunning()) return;
    const exited = new Promise<void>((resolve) => host.child.once("exit", () => resolve()));
    host.child.kill("SIGTERM");
    const isExited = await Promise.race([exited.then(() => true), sleep(timeoutMs).then(() => false)]);
    if (!isExited) host.child.kill("SIGKILL");
  }

  /** Kills every host still running, at once (safe to call from an exit handler). */
  killAll(): void {
    for (const host of this.#hosts.values()) if (host.isRunning()) host.child.kill("SIGKILL");
  }
}

/** Resolves once the host answers on its own subject (an empty request is a quick `bad_request`). */
export async function waitForHost(
  bus: NatsBus,
  prefix: string,
  agent: string,
  host: ScaleHost,
): Promise<void> {
  const subject = `${hostSubject(prefix, host.id)}.agents.${agent}.chat`;
  const deadline = performance.now() + 120_000;
  for (;;) {
    if (!host.isRunning()) throw new Error(`host ${host.id} exited: ${host.output().slice(-800)}`);
    try {
      await bus.request(subject, "{}", { timeoutMs: 5_000 });
      return;
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await sleep(50);
    }
  }
}

/** A process's resident memory, bytes (VmRSS of /proc/<pid>/status); 0 when it is gone. */
export function rssBytes(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

/** Clock ticks per second of /proc/<pid>/stat's times: 100 on Linux (USER_HZ). */
const TICKS_PER_SECOND = 100;

/** CPU seconds a process used so far (user + system, from /proc/<pid>/stat); 0 when it is gone. */
export function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

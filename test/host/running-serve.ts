import type { ChildProcess } from "node:child_process";
import type { Bus } from "../../src/bus/bus.js";
import { BusTimeoutError, NoRespondersError } from "../../src/bus/bus-errors.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { hostSubject } from "../../src/cluster/session-cluster.js";
import { type CliRun, runCli, startBinary } from "../support/cli.js";

/** `agentloop serve` running in this process (for the CLI suites). */
export interface RunningServe {
  /** Aborts the command (SIGINT) and resolves with what it printed and its exit code. */
  stop(): Promise<CliRun>;
  /** The run itself (resolves early if the command fails to start). */
  run: Promise<CliRun>;
}

/** Starts `agentloop serve ...args` in-process; `waitUntilServing` tells when it answers. */
export function startServe(args: readonly string[], env: Record<string, string> = {}): RunningServe {
  const controller = new AbortController();
  const run = runCli(["serve", ...args], { signal: controller.signal, env });
  return {
    run,
    stop: () => {
      controller.abort();
      return run;
    },
  };
}

/** `agentloop serve` as a real process of its own (the built binary), to signal or kill. */
export interface ServeProcess {
  child: ChildProcess;
  /** Resolves when the process exits, with what it printed. */
  run: Promise<CliRun>;
  /** What it has written to stderr so far. */
  stderr(): string;
}

const serveProcesses = new Set<ChildProcess>();

/**
 * Spawns `agentloop serve ...args` (see {@link startBinary}); a process still running after
 * `timeoutMs` (default 5 min: a safety net for a hung process, not a bound on a test) is killed and `run` rejects. {@link killServeProcesses} ends what a
 * failed test left running.
 */
export function startServeProcess(
  args: readonly string[],
  env: Record<string, string> = {},
  timeoutMs = 300_000,
): ServeProcess {
  const { child, result } = startBinary(["serve", ...args], { env, timeoutMs });
  serveProcesses.add(child);
  child.once("exit", () => serveProcesses.delete(child));
  let stderr = "";
  child.stderr?.on("data", (text: string) => {
    stderr += text;
  });
  return { child, run: result, stderr: () => stderr };
}

/** SIGKILLs every serve process still running (for a suite's afterEach). */
export function killServeProcesses(): void {
  for (const child of serveProcesses) child.kill("SIGKILL");
  serveProcesses.clear();
}

/**
 * Resolves once a host answers on `agent`'s chat subject under `prefix` (probing with an empty
 * request, which is answered `bad_request` at once without running a chat), or rejects when
 * `serve` exits first or nothing answers within the time limit (default 60 s: a host starting on a
 * loaded machine took over 15 s).
 */
export async function waitUntilServing(
  bus: Bus,
  prefix: string,
  serve: Pick<RunningServe, "run">,
  agent = "assistant",
  timeoutMs = 60_000,
): Promise<void> {
  let exited: CliRun | undefined;
  void serve.run.then((run) => {
    exited = run;
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited !== undefined) throw new Error(`serve exited: ${JSON.stringify(exited)}`);
    try {
      await bus.request(chatSubject(prefix, agent), "{}", { timeoutMs: 10_000 });
      return;
    } catch (error) {
      // No host yet, or one still starting on a loaded machine that did not answer in time.
      const isWaiting = error instanceof NoRespondersError || error instanceof BusTimeoutError;
      if (!isWaiting || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/**
 * Resolves once nothing subscribes to `subject` any more: a request to it is refused with no
 * responders. A process killed with SIGKILL is gone before nats-server has noticed its closed
 * connection; until then the server still hands it messages (a queue group may pick it), and core
 * NATS never delivers those again. A test that sends right after a kill waits here first, as a
 * real client's retry after its timeout would find the server caught up.
 */
export async function untilNoResponders(bus: Bus, subject: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await bus.request(subject, "{}", { timeoutMs: 1_000 });
    } catch (error) {
      if (error instanceof NoRespondersError) return;
      if (!(error instanceof BusTimeoutError)) throw error;
    }
    if (Date.now() > deadline) throw new Error(`${subject} still has a subscriber after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * {@link waitUntilServing}, then until the host `hostId` answers on its own subject (where other
 * hosts forward to it): another host may have answered the shared subject first. Rejects with the
 * host's stderr when it exits or stays silent for `timeoutMs`.
 */
export async function waitForHost(
  bus: Bus,
  prefix: string,
  hostId: string,
  host: ServeProcess,
  timeoutMs = 60_000,
): Promise<void> {
  await waitUntilServing(bus, prefix, host, "assistant", timeoutMs);
  const subject = `${hostSubject(prefix, hostId)}.agents.assistant.chat`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await bus.request(subject, "{}", { timeoutMs: 10_000 });
      return;
    } catch (error) {
      const { exitCode, signalCode } = host.child;
      if (exitCode !== null || signalCode !== null) {
        throw new Error(`host ${hostId} exited (${exitCode ?? signalCode}): ${host.stderr()}`);
      }
      if (Date.now() > deadline) {
        throw new Error(
          `host ${hostId} did not answer on ${subject} within ${timeoutMs} ms; its stderr: ${host.stderr()}`,
          {
            cause: error,
          },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

import { type CliRun, startBinary } from "../../support/cli.js";

/** A spawned `agentloop up` that printed its UI URL. */
export interface RunningUp {
  /** The UI's URL as printed, e.g. `http://127.0.0.1:PORT/`. */
  url: string;
  /** What the process wrote so far. */
  output(): { stdout: string; stderr: string };
  /**
   * SIGTERM, then SIGKILL if it is still running after `graceMs`; resolves with how it ended.
   * Safe to call more than once (every call gets the same outcome).
   */
  stop(graceMs?: number): Promise<CliRun>;
}

export interface StartUpOptions {
  /** Environment beside PATH (nothing else leaks in from the developer's shell). */
  env?: Record<string, string>;
  /** How long to wait for the UI line. Default 30 s. */
  startTimeoutMs?: number;
}

/** The line `up` prints once the UI listens. */
const UI_LINE = /^agentloop up: UI (http:\/\/\S+)$/m;

/**
 * Spawns the built binary as `agentloop up ...argv` and resolves once it printed its UI URL. If
 * the process ends or stays silent first, it is killed and the promise rejects with its output, so
 * a failed start never leaves a process behind.
 */
export async function startUp(argv: readonly string[], options: StartUpOptions = {}): Promise<RunningUp> {
  // A long-lived service: startBinary's own kill timer must not fire during a suite.
  const running = startBinary(["up", ...argv], {
    ...(options.env === undefined ? {} : { env: options.env }),
    timeoutMs: 30 * 60_000,
  });
  const { child } = running;
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (text: string) => {
    stdout += text;
  });
  child.stderr?.on("data", (text: string) => {
    stderr += text;
  });
  // Settled once, whatever happens; later `stop()` calls reuse it.
  const ended = running.result.then(
    (run) => run,
    (error: unknown) => ({ code: -1, stdout, stderr: `${stderr}\n${String(error)}` }),
  );
  let stopping: Promise<CliRun> | undefined;
  const stop = (graceMs = 10_000): Promise<CliRun> => {
    stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      try {
        return await ended;
      } finally {
        clearTimeout(timer);
      }
    })();
    return stopping;
  };

  const url = await new Promise<string>((resolve, reject) => {
    const check = (): void => {
      const match = UI_LINE.exec(stdout);
      if (match?.[1] === undefined) return;
      cleanup();
      resolve(match[1]);
    };
    const onEnd = (): void => {
      cleanup();
      reject(new Error(`agentloop up ended before printing its URL; stdout: ${stdout} stderr: ${stderr}`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`agentloop up printed no URL in time; stdout: ${stdout} stderr: ${stderr}`));
    }, options.startTimeoutMs ?? 30_000);
    const cleanup = (): void => {
      clearTimeout(timer);
      child.stdout?.off("data", check);
      child.off("close", onEnd);
    };
    child.stdout?.on("data", check);
    child.on("close", onEnd);
  }).catch(async (error: unknown) => {
    await stop();
    throw error;
  });

  return { url, output: () => ({ stdout, stderr }), stop };
}

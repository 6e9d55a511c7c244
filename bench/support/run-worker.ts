import { fork } from "node:child_process";

/** What the worker process measures (bench/worker.ts). */
export type WorkerTask =
  | {
      task: "idle";
      /** agent: createAgent + in-memory history; host: that agent in a SessionActor; the others are baselines. */
      kind: "agent" | "host" | "xstate-loop" | "xstate-session";
      /** Sessions held at the end. */
      count: number;
      /** They are created in this many equal steps, one sample each. */
      steps: number;
    }
  | { task: "active"; kind: "agentloop" | "xstate" | "plain"; count: number; rounds: number }
  | {
      task: "concurrency";
      /** Every loop's sessions are created up front; the measured rounds rotate between the loops. */
      kinds: Array<"agentloop" | "xstate" | "shaped" | "plain">;
      sessions: number;
      /** Measured rounds after one warm-up round; 0 runs the warm-up round only (for peak RSS). */
      runs: number;
      /** Tool steps per chat (default 2: a 3-iteration chat). */
      toolSteps?: number;
      /**
       * Each conversation creates its session, chats once and drops it, all inside the timing
       * (default: sessions created untimed and reused, reset between rounds).
       */
      isFresh?: boolean;
    };

export interface WorkerResult {
  /** Per kind: bytes per session / per chat (idle, active) or chats per second (concurrency). */
  samples: Record<string, number[]>;
  /** Peak resident set size of the worker process, MB. */
  peakRssMb: number;
}

/** Runs one task in a fresh `node --expose-gc` process and returns its result. */
export function runWorker(task: WorkerTask): Promise<WorkerResult> {
  const script = new URL("../worker.js", import.meta.url);
  return new Promise((resolve, reject) => {
    const child = fork(script, [JSON.stringify(task)], {
      execArgv: ["--expose-gc"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let result: WorkerResult | undefined;
    child.on("message", (message) => {
      result = message as WorkerResult;
    });
    child.once("error", reject);
    child.once("exit", (code) => {
      if (result !== undefined) resolve(result);
      else
        reject(
          new Error(`the bench worker for ${JSON.stringify(task)} exited with code ${code} and no result`),
        );
    });
  });
}

import { type ChildProcess, fork } from "node:child_process";

export type SubscriberCommand =
  | { type: "await"; kind: "all" | "deltas"; target: number }
  | { type: "stamping"; isOn: boolean }
  | { type: "take-stamps" }
  | { type: "close" };

export type SubscriberReply =
  | { type: "ready" | "reached"; count: number; deltaCount: number }
  | { type: "stamps"; stamps: number[] };

const TIMEOUT_MS = 30_000;

/** The parent's handle on bench/subscriber-worker.ts: one NATS subscriber in its own process. */
export class RemoteSubscriber {
  readonly #child: ChildProcess;
  #pending: ((reply: SubscriberReply) => void) | undefined;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on("message", (message) => {
      const resolve = this.#pending;
      this.#pending = undefined;
      resolve?.(message as SubscriberReply);
    });
  }

  /** Starts the subscriber and waits until its subscription is registered with the server. */
  static async start(natsUrl: string): Promise<RemoteSubscriber> {
    const child = fork(new URL("../subscriber-worker.js", import.meta.url), [natsUrl], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const subscriber = new RemoteSubscriber(child);
    await subscriber.#next("start");
    return subscriber;
  }

  /** Resolves once the subscriber has consumed `target` messages (all kinds, or text deltas). */
  async until(kind: "all" | "deltas", target: number): Promise<{ count: number; deltaCount: number }> {
    const reply = this.#next(`${target} ${kind === "all" ? "messages" : "deltas"}`);
    this.#child.send({ type: "await", kind, target } satisfies SubscriberCommand);
    const reached = await reply;
    if (reached.type === "stamps") throw new Error("the subscriber answered out of turn");
    return reached;
  }

  /** Turns arrival stamps of text deltas on or off. */
  stamp(isOn: boolean): void {
    this.#child.send({ type: "stamping", isOn } satisfies SubscriberCommand);
  }

  /** The arrival stamps (µs, hrtime: comparable across processes) since the last call. */
  async takeStamps(): Promise<number[]> {
    const reply = this.#next("stamps");
    this.#child.send({ type: "take-stamps" } satisfies SubscriberCommand);
    const stamps = await reply;
    if (stamps.type !== "stamps") throw new Error("the subscriber answered out of turn");
    return stamps.stamps;
  }

  async close(): Promise<void> {
    const exited = new Promise((resolve) => this.#child.once("exit", resolve));
    this.#child.send({ type: "close" } satisfies SubscriberCommand);
    await exited;
  }

  #next(what: string): Promise<SubscriberReply> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending = undefined;
        reject(new Error(`the bench subscriber did not report ${what} within ${TIMEOUT_MS} ms`));
      }, TIMEOUT_MS);
      this.#pending = (reply) => {
        clearTimeout(timer);
        resolve(reply);
      };
    });
  }
}

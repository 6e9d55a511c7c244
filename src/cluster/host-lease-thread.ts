import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { describeError } from "../errors/describe-error.js";
import { SHUTDOWN_WAIT_MS, settlesWithin } from "./bounded-wait.js";
import {
  type FromLeaseThread,
  type LeaseThreadConnect,
  type LeaseThreadData,
  type NotHeld,
  SharedLeaseState,
  sharedMonotonic,
  type ToLeaseThread,
} from "./host-lease-state.js";
import { type LeaseFence, LeaseLostError } from "./lease-fence.js";
import { type LeaseTiming, SessionOwnedElsewhereError } from "./session-lease.js";

/** The lease thread's code, next to this module (in `dist/`, or in an installed package). */
export const HOST_LEASE_WORKER_URL = new URL("./host-lease-worker.js", import.meta.url);

/**
 * Whether the lease thread's code is there to run: it is compiled JavaScript, so a host run from
 * the TypeScript sources (a test importing `src/`) has none next to it.
 */
export function hostLeaseWorkerExists(url: URL = HOST_LEASE_WORKER_URL): boolean {
  return url.protocol === "file:" && existsSync(fileURLToPath(url));
}

/** How long a shutdown waits for the thread to release the lease and close its connection. */
const CLOSE_WAIT_MS = 4 * SHUTDOWN_WAIT_MS;

export interface HostLeaseThreadOptions {
  /** How the thread connects: the host's own NATS settings. */
  connect: LeaseThreadConnect;
  /** The bucket of the host leases (it must exist). */
  bucket: string;
  timing: LeaseTiming;
  hostId: string;
  subject: string;
  /** The agent part of the lease key. */
  agent: string;
  renewEveryMs: number;
  /** The lease is gone (taken over, or not renewed before its local deadline): called once per lease. */
  onLost: (reason: string) => void;
  /** One-line notices: slow and failed renewals (measured in the thread), the thread stopping. */
  log?: (line: string) => void;
  /** Where the thread's code is (default {@link HOST_LEASE_WORKER_URL}). */
  workerUrl?: URL;
}

/** One started thread and what is shared with it. */
interface LeaseThread {
  worker: Worker;
  state: SharedLeaseState;
  /** Acquisitions asked of it and not answered yet. */
  pending: Map<number, { resolve: (epoch: number) => void; reject: (error: Error) => void }>;
  /** Set once it ended (or failed) without being asked to. */
  stoppedBecause: string | undefined;
  isClosing: boolean;
  exited: Promise<void>;
}

/** The host lease as the main thread sees it: the shared state its thread writes. */
class ThreadLease implements LeaseFence {
  lostReason: string | undefined;
  timer: NodeJS.Timeout | undefined;

  constructor(
    readonly epoch: number,
    readonly thread: LeaseThread,
  ) {}

  assertHeld(): void {
    if (this.lostReason !== undefined) {
      throw new LeaseLostError(`this host no longer holds its lease: ${this.lostReason}`, this.epoch);
    }
    const why = this.thread.state.notHeld(this.epoch, sharedMonotonic());
    if (why === undefined) return;
    if (why === "expired") {
      throw new LeaseLostError(
        `this host's lease (epoch ${this.epoch}) ran out before it was renewed`,
        this.epoch,
      );
    }
    throw new LeaseLostError(`this host no longer holds its lease: ${reasonText(why)}`, this.epoch);
  }
}

function reasonText(why: Exclude<NotHeld, "expired">): string {
  return why === "replaced" ? "it was taken again under a newer epoch" : "the lease thread found it lost";
}

/**
 * This host's own lease, taken and renewed by a worker thread with a NATS connection of its own
 * (see host-lease-worker.ts), so that a main event loop stalled by a flood of chats cannot make it
 * lapse. The main thread's fence reads the deadline of the renewals the thread got stored, from
 * shared memory, synchronously; a timer at that deadline (re-armed while renewals move it) tells
 * the loss, as does the thread's own message when it finds the lease lost. A thread that dies, or
 * whose connection closes for good, renews nothing more: the lease lapses at the deadline it last
 * wrote, exactly as when renewals fail, and the next acquisition starts a new thread.
 */
export class HostLeaseThread {
  readonly #options: HostLeaseThreadOptions;
  readonly #log: (line: string) => void;
  #thread: LeaseThread | undefined;
  #held: ThreadLease | undefined;
  #nextId = 0;
  /** The thread's reason for the last lease it found lost. */
  #lastLost: { epoch: number; reason: string } | undefined;
  #isClosed = false;

  constructor(options: HostLeaseThreadOptions) {
    this.#options = options;
    this.#log = options.log ?? (() => {});
  }

  /** The KV revision of the lease as last stored by the thread (0 before the first). */
  get revision(): number {
    return this.#thread?.state.revision ?? 0;
  }

  /** The lease's fence while it is held (not lost yet). */
  fence(): LeaseFence | undefined {
    return this.#held?.lostReason === undefined ? this.#held : undefined;
  }

  /**
   * Takes the lease (a new epoch) through the thread, starting one when none runs.
   * @throws SessionOwnedElsewhereError when another host holds it (taking it over).
   * @throws Error when the thread cannot connect or take it.
   */
  async acquire(): Promise<LeaseFence> {
    if (this.#isClosed) throw new LeaseLostError("the host is shutting down", 0);
    const thread =
      this.#thread !== undefined && this.#thread.stoppedBecause === undefined ? this.#thread : this.#start();
    const id = ++this.#nextId;
    const epoch = await new Promise<number>((resolve, reject) => {
      thread.pending.set(id, { resolve, reject });
      this.#send(thread, { type: "acquire", id });
    });
    const previous = this.#held;
    if (previous !== undefined) clearTimeout(previous.timer);
    const held = new ThreadLease(epoch, thread);
    this.#held = held;
    this.#arm(held);
    return held;
  }

  /** Has the thread release the lease (a compare-and-set) and stop; bounded while NATS is away. */
  async close(): Promise<void> {
    this.#isClosed = true;
    const held = this.#held;
    if (held !== undefined) {
      held.lostReason ??= "released";
      clearTimeout(held.timer);
    }
    const thread = this.#thread;
    if (thread === undefined || thread.stoppedBecause !== undefined) return;
    thread.isClosing = true;
    // Kept alive until the release is written, even when nothing else holds the process open.
    thread.worker.ref();
    this.#send(thread, { type: "close" });
    if (!(await settlesWithin(thread.exited, CLOSE_WAIT_MS))) await thread.worker.terminate();
  }

  #start(): LeaseThread {
    const state = new SharedLeaseState();
    const { connect, bucket, timing, hostId, subject, agent, renewEveryMs } = this.#options;
    const workerData: LeaseThreadData = {
      connect,
      bucket,
      timing,
      hostId,
      subject,
      agent,
      renewEveryMs,
      state: state.buffer,
    };
    const worker = new Worker(this.#options.workerUrl ?? HOST_LEASE_WORKER_URL, {
      workerData,
      name: `agentloop host lease ${hostId}`,
    });
    // The host's own handles keep the process alive; a host never closed does not hang on this one.
    worker.unref();
    let onExit: () => void = () => {};
    const exited = new Promise<void>((resolve) => {
      onExit = resolve;
    });
    const thread: LeaseThread = {
      worker,
      state,
      pending: new Map(),
      stoppedBecause: undefined,
      isClosing: false,
      exited,
    };
    worker.on("message", (message: FromLeaseThread) => this.#onMessage(thread, message));
    worker.on("error", (error) => {
      this.#log(`the host lease thread failed: ${describeError(error)}`);
      this.#stopped(thread, `it failed: ${describeError(error)}`);
    });
    worker.on("exit", (code) => {
      if (!thread.isClosing) this.#stopped(thread, `it exited with code ${code}`);
      onExit();
    });
    this.#thread = thread;
    return thread;
  }

  #send(thread: LeaseThread, message: ToLeaseThread): void {
    thread.worker.postMessage(message);
  }

  #onMessage(thread: LeaseThread, message: FromLeaseThread): void {
    switch (message.type) {
      case "acquired":
        thread.pending.get(message.id)?.resolve(message.epoch);
        thread.pending.delete(message.id);
        return;
      case "acquire-failed": {
        const error =
          message.owner === undefined
            ? new Error(`could not take this host's lease: ${message.message}`)
            : new SessionOwnedElsewhereError(this.#options.agent, this.#options.hostId, message.owner);
        thread.pending.get(message.id)?.reject(error);
        thread.pending.delete(message.id);
        return;
      }
      case "lost": {
        this.#lastLost = { epoch: message.epoch, reason: message.reason };
        const held = this.#held;
        if (held !== undefined && held.thread === thread && held.epoch === message.epoch) {
          this.#lose(held, message.reason);
        }
        return;
      }
      case "log":
        this.#log(message.line);
        return;
    }
  }

  /**
   * The thread ended without being asked to (or failed): nothing renews the lease any more; it is
   * lost at the deadline last written (its timer is left as it is), and acquisitions waiting on the
   * thread fail.
   */
  #stopped(thread: LeaseThread, reason: string): void {
    if (thread.stoppedBecause !== undefined) return;
    thread.stoppedBecause = reason;
    for (const { reject } of thread.pending.values()) {
      reject(new Error(`could not take this host's lease: the host lease thread stopped (${reason})`));
    }
    thread.pending.clear();
    if (this.#held?.thread === thread && this.#held.lostReason === undefined) {
      this.#log(
        `the host lease thread stopped (${reason}): this host's lease is no longer renewed and lapses at its deadline`,
      );
    }
  }

  /** A timer at the deadline last written; re-armed while the thread's renewals move it on. */
  #arm(held: ThreadLease): void {
    clearTimeout(held.timer);
    held.timer = setTimeout(
      () => this.#check(held),
      Math.max(0, held.thread.state.deadline - sharedMonotonic()),
    );
    held.timer.unref?.();
  }

  #check(held: ThreadLease): void {
    if (held.lostReason !== undefined || this.#held !== held) return;
    const why = held.thread.state.notHeld(held.epoch, sharedMonotonic());
    if (why === undefined) {
      this.#arm(held);
      return;
    }
    const stopped = held.thread.stoppedBecause;
    const reason =
      why === "expired"
        ? `its lease was not renewed in time${stopped === undefined ? "" : `: the host lease thread stopped (${stopped})`}`
        : this.#lastLost?.epoch === held.epoch
          ? this.#lastLost.reason
          : reasonText(why);
    this.#lose(held, reason);
  }

  #lose(held: ThreadLease, reason: string): void {
    if (held.lostReason !== undefined) return;
    held.lostReason = reason;
    clearTimeout(held.timer);
    this.#options.onLost(reason);
  }
}

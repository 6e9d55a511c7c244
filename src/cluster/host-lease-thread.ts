import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { describeError } from "../errors/describe-error.js";
import { SHUTDOWN_WAIT_MS, settlesWithin } from "./bounded-wait.js";
import {
  type FromLeaseThread,
  type LeaseThreadConnect,
  type LeaseThreadData,
  type LeaseThreadLease,
  type NotHeld,
  SharedLeaseState,
  sharedMonotonic,
  type ToLeaseThread,
} from "./host-lease-state.js";
import { type LeaseFence, LeaseLostError } from "./lease-fence.js";
import { SessionOwnedElsewhereError } from "./session-lease.js";

/** The lease thread's code, next to this module (in `dist/`, or in an installed package). */
export const HOST_LEASE_WORKER_URL = new URL("./host-lease-worker.js", import.meta.url);

/**
 * Whether the lease thread's code is there to run: it is compiled JavaScript, so a host run from
 * the TypeScript sources (a test importing `src/`) has none next to it.
 */
export function hostLeaseWorkerExists(url: URL = HOST_LEASE_WORKER_URL): boolean {
  return url.protocol === "file:" && existsSync(fileURLToPath(url));
}

/**
 * How long a lease past its deadline waits for the thread's own notice of the loss (which says how
 * its renewals went) before it is given up with a plain one.
 */
const THREAD_WORD_WAIT_MS = 1_000;

/** How long a shutdown waits for the thread to release a lease, or to close its connection. */
const CLOSE_WAIT_MS = 2 * SHUTDOWN_WAIT_MS;

/** The lease as the thread is told of it ({@link LeaseThreadLease}), but its key and shared state. */
export interface HostLeaseThreadOptions extends Omit<LeaseThreadLease, "key" | "state"> {
  /** How the thread connects: the host's own NATS settings. */
  connect: LeaseThreadConnect;
  /** The lease is gone (taken over, or not renewed before its local deadline): called once per lease. */
  onLost: (reason: string) => void;
  /** One-line notices: slow and failed renewals (measured in the thread), the thread stopping. */
  log?: (line: string) => void;
  /** Where the thread's code is (default {@link HOST_LEASE_WORKER_URL}). */
  workerUrl?: URL;
}

interface Pending {
  resolve: (epoch: number) => void;
  reject: (error: Error) => void;
  lease?: LeaseThreadLease;
}

/**
 * One worker thread and its connection, shared by every host lease of the process with the same
 * connection settings (the host's, and each tenant's it serves): one thread and one connection,
 * however many prefixes are served.
 */
class LeaseThread {
  readonly worker: Worker;
  readonly exited: Promise<void>;
  /** Set once it ended (or failed) without being asked to. */
  stoppedBecause: string | undefined;
  isClosing = false;
  readonly #pending = new Map<number, Pending>();
  /** The leases kept on it, by key. */
  readonly #users = new Map<string, HostLeaseThread>();
  #nextId = 0;

  constructor(connect: LeaseThreadConnect, url: URL) {
    const workerData: LeaseThreadData = { connect };
    this.worker = new Worker(url, { workerData, name: "agentloop host lease" });
    // The host's own handles keep the process alive; a host never closed does not hang on this one.
    this.worker.unref();
    let onExit: () => void = () => {};
    this.exited = new Promise<void>((resolve) => {
      onExit = resolve;
    });
    this.worker.on("message", (message: FromLeaseThread) => this.#onMessage(message));
    this.worker.on("error", (error) => {
      for (const user of this.#users.values())
        user.threadLog(`the host lease thread failed: ${describeError(error)}`);
      this.#stopped(`it failed: ${describeError(error)}`);
    });
    this.worker.on("exit", (code) => {
      if (!this.isClosing) this.#stopped(`it exited with code ${code}`);
      onExit();
    });
  }

  get isUsable(): boolean {
    return this.stoppedBecause === undefined && !this.isClosing;
  }

  attach(key: string, user: HostLeaseThread): void {
    this.#users.set(key, user);
  }

  /** The lease's epoch once taken. */
  acquire(lease: LeaseThreadLease): Promise<number> {
    return this.#ask({ type: "acquire", id: 0, lease }, lease);
  }

  /** Resolves once the lease is released (or its release failed and was logged). */
  async release(key: string): Promise<void> {
    if (this.stoppedBecause !== undefined) return;
    await this.#ask({ type: "release", id: 0, key }).catch(() => {});
  }

  /** This lease no longer uses the thread; the last one out closes it. */
  async detach(key: string, user: HostLeaseThread): Promise<void> {
    if (this.#users.get(key) === user) this.#users.delete(key);
    if (this.#users.size > 0 || this.isClosing) return;
    this.isClosing = true;
    if (this.stoppedBecause !== undefined) return;
    // Kept alive until its connection is closed, even when nothing else holds the process open.
    this.worker.ref();
    this.#send({ type: "close" });
    if (!(await settlesWithin(this.exited, CLOSE_WAIT_MS))) await this.worker.terminate();
  }

  #ask(message: Extract<ToLeaseThread, { id: number }>, lease?: LeaseThreadLease): Promise<number> {
    if (this.stoppedBecause !== undefined) {
      return Promise.reject(new Error(`the host lease thread stopped (${this.stoppedBecause})`));
    }
    const id = ++this.#nextId;
    return new Promise<number>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, ...(lease === undefined ? {} : { lease }) });
      this.#send({ ...message, id });
    });
  }

  #send(message: ToLeaseThread): void {
    this.worker.postMessage(message);
  }

  #onMessage(message: FromLeaseThread): void {
    switch (message.type) {
      case "acquired":
      case "released": {
        this.#pending.get(message.id)?.resolve(message.type === "acquired" ? message.epoch : 0);
        this.#pending.delete(message.id);
        return;
      }
      case "acquire-failed": {
        const pending = this.#pending.get(message.id);
        this.#pending.delete(message.id);
        if (pending === undefined) return;
        const { lease } = pending;
        pending.reject(
          message.owner === undefined || lease === undefined
            ? new Error(`could not take this host's lease: ${message.message}`)
            : new SessionOwnedElsewhereError(lease.agent, lease.hostId, message.owner),
        );
        return;
      }
      case "lost":
        this.#users.get(message.key)?.threadLost(this, message.epoch, message.reason);
        return;
      case "log": {
        const users = message.key === undefined ? [...this.#users.values()] : [this.#users.get(message.key)];
        for (const user of users) user?.threadLog(message.line);
        return;
      }
    }
  }

  /**
   * The thread ended without being asked to (or failed): nothing renews its leases any more; each
   * is lost at the deadline last written, and what waits on the thread fails.
   */
  #stopped(reason: string): void {
    if (this.stoppedBecause !== undefined) return;
    this.stoppedBecause = reason;
    for (const { reject } of this.#pending.values()) {
      reject(new Error(`could not take this host's lease: the host lease thread stopped (${reason})`));
    }
    this.#pending.clear();
    for (const user of this.#users.values()) user.threadStopped(this, reason);
  }
}

/** Host leases held through a thread so far in this process (numbers their keys). */
let holders = 0;

/** The running threads, by connection settings and code. */
const threads = new Map<string, LeaseThread>();

function threadFor(connect: LeaseThreadConnect, url: URL): LeaseThread {
  const key = JSON.stringify([url.href, connect]);
  let thread = threads.get(key);
  if (thread === undefined || !thread.isUsable) {
    thread = new LeaseThread(connect, url);
    threads.set(key, thread);
    const started = thread;
    void started.exited.then(() => {
      if (threads.get(key) === started) threads.delete(key);
    });
  }
  return thread;
}

/** The host lease as the main thread sees it: the shared state the thread writes. */
class ThreadLease implements LeaseFence {
  lostReason: string | undefined;
  timer: NodeJS.Timeout | undefined;
  /** Past its deadline: waiting a moment for the thread to tell why. */
  isAwaitingThread = false;

  constructor(
    readonly epoch: number,
    readonly thread: LeaseThread,
    readonly state: SharedLeaseState,
  ) {}

  assertHeld(): void {
    if (this.lostReason !== undefined) {
      throw new LeaseLostError(`this host no longer holds its lease: ${this.lostReason}`, this.epoch);
    }
    const why = this.state.notHeld(this.epoch, sharedMonotonic());
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
 * This host's own lease (of one prefix), taken and renewed by a worker thread with a NATS
 * connection of its own (see host-lease-worker.ts; one thread for every such lease of the
 * process), so that a main event loop stalled by a flood of chats cannot make it lapse. The main
 * thread's fence reads the deadline of the renewals the thread got stored, from shared memory,
 * synchronously; a timer at that deadline (re-armed while renewals move it) tells the loss, as
 * does the thread's own message when it finds the lease lost. A thread that dies, or whose
 * connection closes for good, renews nothing more: the lease lapses at the deadline it last wrote,
 * exactly as when renewals fail, and the next acquisition starts a new thread.
 */
export class HostLeaseThread {
  readonly #options: HostLeaseThreadOptions;
  readonly #log: (line: string) => void;
  readonly #state = new SharedLeaseState();
  /** Names this lease to the thread. */
  readonly #key: string;
  #thread: LeaseThread | undefined;
  #held: ThreadLease | undefined;
  /** The thread's reason for the last lease it found lost. */
  #lastLost: { epoch: number; reason: string } | undefined;
  #isClosed = false;

  constructor(options: HostLeaseThreadOptions) {
    this.#options = options;
    this.#log = options.log ?? (() => {});
    // Unique per holder: two holders of one lease in a process (a host started again before the
    // old one closed) are kept apart, as two processes would be.
    this.#key = `${options.bucket}/${options.agent}.${options.hostId}#${++holders}`;
  }

  /** The KV revision of the lease as last stored by the thread (0 before the first). */
  get revision(): number {
    return this.#state.revision;
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
    const { connect, workerUrl, bucket, timing, hostId, subject, agent, renewEveryMs } = this.#options;
    const thread = threadFor(connect, workerUrl ?? HOST_LEASE_WORKER_URL);
    const previousThread = this.#thread;
    if (previousThread !== undefined && previousThread !== thread)
      void previousThread.detach(this.#key, this);
    this.#thread = thread;
    thread.attach(this.#key, this);
    const lease: LeaseThreadLease = {
      key: this.#key,
      bucket,
      ...(this.#options.replicas === undefined ? {} : { replicas: this.#options.replicas }),
      timing,
      hostId,
      subject,
      agent,
      renewEveryMs,
      state: this.#state.buffer,
    };
    const epoch = await thread.acquire(lease);
    const previous = this.#held;
    if (previous !== undefined) clearTimeout(previous.timer);
    const held = new ThreadLease(epoch, thread, this.#state);
    this.#held = held;
    this.#arm(held);
    return held;
  }

  /** Has the thread release the lease (a compare-and-set; bounded while NATS is away). */
  async close(): Promise<void> {
    this.#isClosed = true;
    const held = this.#held;
    if (held !== undefined) {
      held.lostReason ??= "released";
      clearTimeout(held.timer);
    }
    const thread = this.#thread;
    if (thread === undefined) return;
    await settlesWithin(thread.release(this.#key), CLOSE_WAIT_MS);
    await thread.detach(this.#key, this);
  }

  /** The thread found the lease at `epoch` lost. */
  threadLost(thread: LeaseThread, epoch: number, reason: string): void {
    this.#lastLost = { epoch, reason };
    const held = this.#held;
    if (held !== undefined && held.thread === thread && held.epoch === epoch) this.#lose(held, reason);
  }

  threadLog(line: string): void {
    this.#log(line);
  }

  /** The thread ended: the lease is left to its deadline's timer, which loses it. */
  threadStopped(thread: LeaseThread, reason: string): void {
    const held = this.#held;
    if (held?.thread === thread && held.lostReason === undefined) {
      this.#log(
        `the host lease thread stopped (${reason}): this host's lease is no longer renewed and lapses at its deadline`,
      );
    }
  }

  /** A timer at the deadline last written; re-armed while the thread's renewals move it on. */
  #arm(held: ThreadLease): void {
    clearTimeout(held.timer);
    held.timer = setTimeout(() => this.#check(held), Math.max(0, held.state.deadline - sharedMonotonic()));
    held.timer.unref?.();
  }

  #check(held: ThreadLease): void {
    if (held.lostReason !== undefined || this.#held !== held) return;
    const why = held.state.notHeld(held.epoch, sharedMonotonic());
    if (why === undefined) {
      this.#arm(held);
      return;
    }
    const stopped = held.thread.stoppedBecause;
    // Marked lost in the shared state, its message with the reason may not have been read yet.
    const isUntold = why === "expired" || (why === "lost" && this.#lastLost?.epoch !== held.epoch);
    if (isUntold && stopped === undefined && !held.isAwaitingThread) {
      // The thread times the same deadline and tells the loss with its account of the renewals: its
      // word is awaited a moment (the fence refuses meanwhile already).
      held.isAwaitingThread = true;
      held.timer = setTimeout(() => this.#check(held), THREAD_WORD_WAIT_MS);
      held.timer.unref?.();
      return;
    }
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

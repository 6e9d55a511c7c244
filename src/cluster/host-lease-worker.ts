/**
 * The host lease's thread (a `node:worker_threads` Worker started by {@link HostLeaseThread}): it
 * takes and renews this host's own lease on a NATS connection of its own, so a main event loop
 * that stalls for seconds under load neither sends a renewal late nor reads its answer late. Each
 * stored renewal's deadline is written to the shared state at once, where the main thread's fence
 * reads it; a loss is written there too, and told by message.
 */
import { type MessagePort, parentPort, workerData } from "node:worker_threads";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { toConnectionOptions } from "../bus/nats-bus.js";
import { describeError } from "../errors/describe-error.js";
import { SHUTDOWN_WAIT_MS, settlesWithin } from "./bounded-wait.js";
import {
  type FromLeaseThread,
  type LeaseThreadData,
  SharedLeaseState,
  sharedMonotonic,
  type ToLeaseThread,
} from "./host-lease-state.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { RenewalWatch } from "./renewal-watch.js";
import { SessionLeaseStore, SessionOwnedElsewhereError } from "./session-lease.js";

function parentPortOf(): MessagePort {
  if (parentPort === null) {
    throw new Error(
      "host-lease-worker.js runs as a worker thread of a host (HostLeaseThread), not on its own",
    );
  }
  return parentPort;
}

const port = parentPortOf();
const data = workerData as LeaseThreadData;
const state = new SharedLeaseState(data.state);
const post = (message: FromLeaseThread) => port.postMessage(message);
const log = (line: string) => post({ type: "log", line });
const watch = new RenewalWatch(sharedMonotonic, "lease thread event loop");

let isConnected = true;
/** The epoch of the lease held now (the last one a deadline was written for). */
let heldEpoch: number | undefined;
let keeper: LeaseKeeper | undefined;
let closing: Promise<void> | undefined;

const ready: Promise<{ connection: NatsConnection; keeper: LeaseKeeper }> = (async () => {
  const connection = await connect(toConnectionOptions(data.connect));
  void (async () => {
    for await (const status of connection.status()) {
      if (status.type === "disconnect") isConnected = false;
      else if (status.type === "reconnect") isConnected = true;
    }
  })().catch(() => {
    // The status stream ends with the connection.
  });
  // Closed for good (not a reconnect): renewals stop, so the thread ends and the main thread lets
  // the lease lapse at its deadline.
  void connection.closed().then((error) => {
    if (closing !== undefined) return;
    log(`the lease connection closed${error === undefined ? "" : `: ${describeError(error)}`}`);
    process.exit(1);
  });
  const store = await SessionLeaseStore.open(connection, { bucket: data.bucket, timing: data.timing });
  keeper = new LeaseKeeper({
    store,
    hostId: data.hostId,
    subject: data.subject,
    monotonic: sharedMonotonic,
    renewEveryMs: data.renewEveryMs,
    isConnected: () => isConnected && !connection.isClosed(),
    log,
    onDeadline: (lease, deadline) => {
      heldEpoch = lease.record.epoch;
      state.write(lease.record.epoch, deadline, lease.revision);
    },
    onLost: (_agent, _session, reason) => {
      // The one lease this thread holds: the last one a deadline was written for.
      if (heldEpoch === undefined) return;
      state.markLost(heldEpoch);
      post({ type: "lost", epoch: heldEpoch, reason: `${reason} (${watch.describe()})` });
    },
    onRenewal: (tookMs, isRenewed) => {
      // A renewal slower than its interval is the first sign of a lease about to lapse.
      if (tookMs > data.renewEveryMs) {
        log(
          `this host's lease renewal ${isRenewed ? "took" : "failed after"} ${Math.round(tookMs)} ms (${watch.describe()})`,
        );
      }
      watch.renewed(tookMs, isRenewed);
    },
  });
  return { connection, keeper };
})();
// Failing to connect is told to whoever asks for the lease; the thread then ends.
ready.catch(() => {});

async function acquire(id: number): Promise<void> {
  try {
    const { keeper } = await ready;
    const fence = await keeper.acquire(data.agent, data.hostId);
    post({ type: "acquired", id, epoch: fence.epoch });
  } catch (error) {
    const owner = error instanceof SessionOwnedElsewhereError ? { owner: error.owner } : {};
    post({ type: "acquire-failed", id, message: describeError(error), ...owner });
    // No connection: nothing more can be done here; the next acquisition starts a new thread.
    if (keeper === undefined) process.exit(1);
  }
}

async function close(): Promise<void> {
  let connection: NatsConnection | undefined;
  try {
    ({ connection } = await ready);
  } catch {
    // Never connected: nothing to release.
  }
  // Released with a compare-and-set, as on the main thread (bounded while NATS is away).
  await keeper?.close();
  if (connection !== undefined) await settlesWithin(connection.close(), SHUTDOWN_WAIT_MS);
  watch.close();
  port.close();
}

port.on("message", (message: ToLeaseThread) => {
  if (message.type === "acquire") void acquire(message.id);
  else if (message.type === "close") closing ??= close();
});

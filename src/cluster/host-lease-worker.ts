/**
 * The host lease thread (a `node:worker_threads` Worker started by {@link HostLeaseThread}): it
 * takes and renews the host's own leases (one per served prefix) on a NATS connection of its own,
 * so a main event loop that stalls for seconds under load neither sends a renewal late nor reads
 * its answer late. Each stored renewal's deadline is written at once to the lease's shared state,
 * where the main thread's fence reads it; a loss is written there too, and told by message.
 */
import { type MessagePort, parentPort, workerData } from "node:worker_threads";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { toConnectionOptions } from "../bus/nats-bus.js";
import { describeError } from "../errors/describe-error.js";
import { InternalError } from "../errors/internal-error.js";
import { SHUTDOWN_WAIT_MS, settlesWithin } from "./bounded-wait.js";
import {
  type FromLeaseThread,
  type LeaseThreadData,
  type LeaseThreadLease,
  SharedLeaseState,
  sharedMonotonic,
  type ToLeaseThread,
} from "./host-lease-state.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { RenewalWatch } from "./renewal-watch.js";
import { SessionLeaseStore, SessionOwnedElsewhereError } from "./session-lease.js";

function parentPortOf(): MessagePort {
  if (parentPort === null) {
    throw new InternalError(
      "host-lease-worker.js runs as a worker thread of a host (HostLeaseThread), not on its own",
    );
  }
  return parentPort;
}

const port = parentPortOf();
const data = workerData as LeaseThreadData;
const post = (message: FromLeaseThread) => port.postMessage(message);

let isConnected = true;
let closing: Promise<void> | undefined;

const ready: Promise<NatsConnection> = (async () => {
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
  // each lease lapse at its deadline.
  void connection.closed().then((error) => {
    if (closing !== undefined) return;
    post({
      type: "log",
      key: undefined,
      line: `the host lease connection closed${error === undefined ? "" : `: ${describeError(error)}`}`,
    });
    process.exit(1);
  });
  return connection;
})();
// Failing to connect is told to whoever asks for a lease; the thread then ends.
ready.catch(() => {});

/** One lease kept here, with the renewals' account for its notices. */
interface KeptLease {
  keeper: LeaseKeeper;
  watch: RenewalWatch;
}

const kept = new Map<string, Promise<KeptLease>>();

function keep(lease: LeaseThreadLease): Promise<KeptLease> {
  let keeping = kept.get(lease.key);
  if (keeping === undefined) {
    keeping = open(lease);
    kept.set(lease.key, keeping);
    keeping.catch(() => kept.delete(lease.key));
  }
  return keeping;
}

async function open(lease: LeaseThreadLease): Promise<KeptLease> {
  const connection = await ready;
  const store = await SessionLeaseStore.open(connection, {
    bucket: lease.bucket,
    timing: lease.timing,
    ...(lease.replicas === undefined ? {} : { replicas: lease.replicas }),
  });
  const state = new SharedLeaseState(lease.state);
  const watch = new RenewalWatch(sharedMonotonic, "lease thread event loop");
  const log = (line: string) => post({ type: "log", key: lease.key, line });
  /** The epoch of the lease held now: the last one a deadline was written for. */
  let heldEpoch: number | undefined;
  const keeper = new LeaseKeeper({
    store,
    hostId: lease.hostId,
    subject: lease.subject,
    monotonic: sharedMonotonic,
    renewEveryMs: lease.renewEveryMs,
    isConnected: () => isConnected && !connection.isClosed(),
    log,
    onDeadline: (stored, deadline) => {
      heldEpoch = stored.record.epoch;
      state.write(stored.record.epoch, deadline, stored.revision);
    },
    onLost: (_agent, _session, reason) => {
      if (heldEpoch === undefined) return;
      state.markLost(heldEpoch);
      post({ type: "lost", key: lease.key, epoch: heldEpoch, reason: `${reason} (${watch.describe()})` });
    },
    onRenewal: (tookMs, isRenewed) => {
      // A renewal slower than its interval is the first sign of a lease about to lapse.
      if (tookMs > lease.renewEveryMs) {
        log(
          `this host's lease renewal ${isRenewed ? "took" : "failed after"} ${Math.round(tookMs)} ms (${watch.describe()})`,
        );
      }
      watch.renewed(tookMs, isRenewed);
    },
  });
  return { keeper, watch };
}

async function acquire(id: number, lease: LeaseThreadLease): Promise<void> {
  try {
    const { keeper } = await keep(lease);
    const fence = await keeper.acquire(lease.agent, lease.hostId);
    post({ type: "acquired", id, epoch: fence.epoch });
  } catch (error) {
    const owner = error instanceof SessionOwnedElsewhereError ? { owner: error.owner } : {};
    post({ type: "acquire-failed", id, message: describeError(error), ...owner });
    // No connection: nothing more can be done here; the next acquisition starts a new thread.
    if (!(await ready.then(() => true).catch(() => false))) process.exit(1);
  }
}

/** Gives the lease up (a compare-and-set, bounded while NATS is away) and stops renewing it. */
async function release(key: string): Promise<void> {
  const keeping = kept.get(key);
  kept.delete(key);
  const lease = await keeping?.catch(() => undefined);
  await lease?.keeper.close();
  lease?.watch.close();
}

async function close(): Promise<void> {
  await Promise.allSettled([...kept.keys()].map(release));
  const connection = await ready.catch(() => undefined);
  if (connection !== undefined) await settlesWithin(connection.close(), SHUTDOWN_WAIT_MS);
  port.close();
}

port.on("message", (message: ToLeaseThread) => {
  if (message.type === "acquire") void acquire(message.id, message.lease);
  else if (message.type === "release") {
    void release(message.key).finally(() => post({ type: "released", id: message.id }));
  } else if (message.type === "close") closing ??= close();
});

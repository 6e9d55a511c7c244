/**
 * The failover soak: several `agentloop serve --history nats` processes (dist/) on one
 * nats-server; each run sends chats with ids to a fresh session, kills its owner with SIGKILL at a
 * random point (mid-stream, mid-tool, or while messages are queued), starts a replacement host, and
 * retries every unanswered id until answered. Two kill points fall in a shard hand-off: a fourth
 * host joins while the session's chats run on a shard that moves to it, and either the old owner is
 * killed while it drains the shard (the joiner then takes the shard over) or the joiner is killed
 * right after it took the shard, with requests for the session waiting or queued. Checked per run:
 * each id is answered, every reply of an id is the same successful result, each user message is in
 * the session's history once, no tool call dangles in the history, the non-idempotent tool ran at
 * most once per call id, and the next owner served the session within lease TTL + 2 s of the kill.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type KV, Kvm } from "@nats-io/kv";
import type { Subscription } from "../../src/bus/bus.js";
import { parseChatReply } from "../../src/bus/contract.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, sessionEventsPattern } from "../../src/bus/subjects.js";
import { listKvKeys } from "../../src/cluster/kv-keys.js";
import { membersBucketName } from "../../src/cluster/membership.js";
import { hostSubject } from "../../src/cluster/session-cluster.js";
import { shardsBucketName } from "../../src/cluster/shard-keeper.js";
import { DEFAULT_SHARD_COUNT, preferredOwner, shardOf } from "../../src/cluster/shard-map.js";
import { NatsHistoryStore } from "../../src/context/nats-history-store.js";
import type { Message } from "../../src/llm/types.js";
import {
  chatTurnSse,
  type FakeProvider,
  type RecordedRequest,
  startFakeProvider,
} from "../../src/testing/index.js";
import { startNatsServer } from "../support/nats-server.js";
import { percentile } from "../support/stats.js";

/**
 * Where a host is killed: the session's owner mid-stream, mid-tool or with messages queued; during a
 * hand-off of the session's shard to a joining host, the old owner while it drains the shard
 * (`handoff-old`) or the joiner right after it took the shard (`handoff-new`).
 */
export const KILL_POINTS = ["mid-stream", "mid-tool", "queued", "handoff-old", "handoff-new"] as const;
export type KillPoint = (typeof KILL_POINTS)[number];

export interface SoakOptions {
  runs: number;
  seed: number;
  /** `serve` processes kept running (a killed one is replaced). Default 3. */
  hosts?: number;
  /** `--lease-ttl` of every host, in ms. Default 2000. */
  leaseTtlMs?: number;
  /** A nats-server with JetStream to use (with a unique `prefix`); default: a private one. */
  natsUrl?: string;
  prefix?: string;
  /** How long a retry waits for its reply before the next one, ms. Default 6000. */
  retryTimeoutMs?: number;
  /**
   * Count a run whose next owner served later than lease TTL + 2 s as a violation. Default true;
   * the test suite turns it off (a loaded machine says nothing about the design's bound there: the
   * time is still measured, in `failoverMs`).
   */
  checkFailoverTime?: boolean;
  /** The kill points taken in turn, run after run. Default: all of {@link KILL_POINTS}. */
  points?: readonly KillPoint[];
  /** Progress lines (one per run). Default: none. */
  log?: (line: string) => void;
}

export interface SoakReport {
  runs: number;
  seed: number;
  hosts: number;
  leaseTtlMs: number;
  retryTimeoutMs: number;
  kills: Record<KillPoint, number>;
  /** Runs whose kill point was not reached (the chats finished first): no kill, still checked. */
  missedKills: number;
  requests: number;
  /** Requests answered (at least once). */
  answered: number;
  /** Replies received, originals and retries together. */
  replies: number;
  /** Retry attempts sent after a kill. */
  retries: number;
  /** First attempts that got no reply (their host was killed): each id is then retried. */
  unansweredFirstAttempts: number;
  /** Retries that got no reply within the retry timeout (then retried again). */
  lostRetries: number;
  /** Replies `unavailable` (retryable: the session's shard was changing owner): retried with the same id. */
  unavailableReplies: number;
  resumed: number;
  inDoubt: number;
  toolRuns: number;
  /** Kill to the first event or reply of the session from another host, ms. */
  failoverMs: number[];
  /** The same, by kill point. */
  failoverMsByPoint: Record<KillPoint, number[]>;
  /** Violations found in runs of each kill point. */
  violationsByPoint: Record<KillPoint, number>;
  /** Kill to the moment every id of the run had its reply (what a retrying client waits), ms. */
  answeredMs: number[];
  violations: string[];
  durationMs: number;
}

const AGENT = "assistant";
const TOOL_SECONDS = 1.5;
const TEXT_DELTAS = 10;
const DELTA_MS = 80;
const ATTEMPT_TIMEOUT_MS = 6_000;
const FIRST_ATTEMPT_TIMEOUT_MS = 20_000;
const RUN_DEADLINE_MS = 90_000;
const BIN_PATH = join(packageRoot(), "dist/src/cli/bin.js");

/** The directory of agentloop's package.json (this file runs from bench/soak or dist/bench/soak). */
function packageRoot(): string {
  let directory = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(directory, "package.json")) && dirname(directory) !== directory) {
    directory = dirname(directory);
  }
  return directory;
}

/** mulberry32: a small seeded generator, so a seed replays the same choices. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

async function untilSettled(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

/** The reason of the first condition not met, or "" when all are. */
function firstUnmet(conditions: readonly (readonly [boolean, string])[]): string {
  return conditions.find(([isMet]) => !isMet)?.[1] ?? "";
}

function perPoint<T>(make: () => T): Record<KillPoint, T> {
  return Object.fromEntries(KILL_POINTS.map((point) => [point, make()])) as Record<KillPoint, T>;
}

/**
 * A session named after `base` whose shard moves to `joiner` when it joins `members`: the shard's
 * preferred owner (the rendezvous hash every host computes) is the joiner once it is a member.
 */
export function sessionMovingTo(joiner: string, members: readonly string[], base: string): string {
  const after = [...new Set([...members, joiner])].sort();
  for (let suffix = 0; ; suffix++) {
    const session = suffix === 0 ? base : `${base}-${suffix}`;
    if (preferredOwner(shardOf(AGENT, session, DEFAULT_SHARD_COUNT), after) === joiner) return session;
  }
}

/** What the fake model answers to a user text (the final reply of its chat). */
export function expectedResult(text: string): string {
  return text.includes("[tool]") ? `done: ${text}` : `answer to ${text}`;
}

/** The tool call id the fake model gives a user text's tool call (`r3m1` → `call_r3m1`). */
function callIdOf(text: string): string {
  return `call_${text.split(" ")[0]}`;
}

interface WireMessage {
  role: string;
  content: unknown;
}

/**
 * The fake model, stateless so every host sees the same one: a user text with `[tool]` gets a
 * call to `shell` (appending the call id to the counter file, then sleeping) and to `current_time`
 * (idempotent); after tool results, or for any other text, the answer streams in slow deltas.
 */
function modelScript(counterFile: string) {
  const slowText = (text: string) => {
    const size = Math.ceil(text.length / TEXT_DELTAS);
    const deltas = Array.from({ length: Math.ceil(text.length / size) }, (_, i) =>
      text.slice(i * size, (i + 1) * size),
    );
    return { ...chatTurnSse({ text: deltas }), delayMs: DELTA_MS };
  };
  return (request: RecordedRequest) => {
    const messages = (request.body as { messages?: WireMessage[] }).messages ?? [];
    const lastUser = messages.findLast((message) => message.role === "user");
    const text = typeof lastUser?.content === "string" ? lastUser.content : "";
    if (messages.at(-1)?.role === "tool" || !text.includes("[tool]")) return slowText(expectedResult(text));
    const callId = callIdOf(text);
    const command = `echo ${callId} >> ${JSON.stringify(counterFile)} && sleep ${TOOL_SECONDS}`;
    return {
      ...chatTurnSse({
        toolCalls: [
          { id: callId, name: "shell", arguments: JSON.stringify({ command }) },
          { id: `${callId}_time`, name: "current_time", arguments: "{}" },
        ],
      }),
      delayMs: DELTA_MS,
    };
  };
}

interface Host {
  id: string;
  child: ChildProcess;
  output: () => string;
}

interface SoakEvent {
  kind: string;
  host?: string;
  chatId?: string;
  at: number;
}

interface TrackedRequest {
  id: string;
  text: string;
  results: string[];
  errors: string[];
  /** Its first attempt, settled once replied to or timed out. */
  first?: Promise<void>;
  /** Replies `unavailable` (retryable) it got. */
  unavailable: number;
}

/** Runs the soak and returns its counts; never throws for a violation (they are listed). */
export async function runFailoverSoak(options: SoakOptions): Promise<SoakReport> {
  if (!existsSync(BIN_PATH)) throw new Error(`${BIN_PATH} is missing: run \`npm run build\` first`);
  const started = performance.now();
  const hostCount = options.hosts ?? 3;
  const ttl = options.leaseTtlMs ?? 2000;
  const log = options.log ?? (() => {});
  const random = seededRandom(options.seed);
  const prefix = options.prefix ?? "soak";
  const report: SoakReport = {
    runs: options.runs,
    seed: options.seed,
    hosts: hostCount,
    leaseTtlMs: ttl,
    retryTimeoutMs: options.retryTimeoutMs ?? ATTEMPT_TIMEOUT_MS,
    kills: perPoint(() => 0),
    missedKills: 0,
    requests: 0,
    answered: 0,
    replies: 0,
    retries: 0,
    unansweredFirstAttempts: 0,
    lostRetries: 0,
    unavailableReplies: 0,
    answeredMs: [],
    resumed: 0,
    inDoubt: 0,
    toolRuns: 0,
    failoverMs: [],
    failoverMsByPoint: perPoint(() => []),
    violationsByPoint: perPoint(() => 0),
    violations: [],
    durationMs: 0,
  };

  const ownServer = options.natsUrl === undefined ? await startNatsServer() : undefined;
  const natsUrl = options.natsUrl ?? ownServer!.url;
  const directory = await mkdtemp(join(tmpdir(), "agentloop-soak-"));
  const counterFile = join(directory, "side-effects");
  const agentsFile = join(directory, "agents.json");
  await writeFile(
    agentsFile,
    JSON.stringify({ agents: [{ name: AGENT, tools: ["shell", "current_time"], maxIterations: 4 }] }),
  );
  let provider: FakeProvider | undefined;
  let bus: NatsBus | undefined;
  let store: NatsHistoryStore | undefined;
  const hosts = new Map<string, Host>();
  const pending: Promise<unknown>[] = [];
  let generation = 0;

  const nextHostId = (slot: number) => `h${slot}g${generation}`;
  const startHost = (slot: number): Host => {
    const id = nextHostId(slot);
    generation++;
    const child = spawn(
      process.execPath,
      [
        BIN_PATH,
        "serve",
        ...["--nats", natsUrl, "--prefix", prefix, "--agents", agentsFile, "--history", "nats"],
        ...["--lease-ttl", `${ttl}ms`, "--host-id", id, "--db", join(directory, `${id}.db`)],
      ],
      {
        cwd: directory,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...provider!.env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout?.setEncoding("utf8").on("data", (text: string) => {
      output += text;
    });
    child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      output += text;
    });
    const host = { id, child, output: () => output };
    hosts.set(id, host);
    child.once("exit", () => hosts.delete(id));
    return host;
  };

  /** Resolves once the host answers on its own subject (an empty request is a quick `bad_request`). */
  const waitForHost = async (host: Host): Promise<void> => {
    const subject = `${hostSubject(prefix, host.id)}.agents.${AGENT}.chat`;
    const deadline = performance.now() + 30_000;
    for (;;) {
      if (host.child.exitCode !== null)
        throw new Error(`host ${host.id} exited: ${host.output().slice(-500)}`);
      try {
        await bus!.request(subject, "{}", { timeoutMs: 5_000 });
        return;
      } catch (error) {
        if (performance.now() > deadline) throw error;
        await sleep(25);
      }
    }
  };

  /** Stops a joiner whose kill point was missed (one host beyond the size): it hands its shards back. */
  const retire = async (host: Host): Promise<void> => {
    if (host.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => host.child.once("exit", () => resolve()));
    host.child.kill("SIGTERM");
    if (!(await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]))) {
      host.child.kill("SIGKILL");
      await exited;
    }
  };

  let members: KV | undefined;
  let shards: KV | undefined;
  let shardKeyPrefix: string | undefined;
  /** Whether `host` has announced itself in the members bucket (the others then rebalance). */
  const isMember = async (host: string): Promise<boolean> => {
    members ??= await new Kvm(bus!.connection).open(membersBucketName(prefix));
    const entry = await members.get(host);
    return entry !== null && entry.operation === "PUT";
  };
  /** The shard's lease as stored now: its host, and whether that host released it. */
  const shardLease = async (shard: number): Promise<{ host: string; released: boolean } | undefined> => {
    shards ??= await new Kvm(bus!.connection).open(shardsBucketName(prefix));
    // `shard.<n>`, or `shard_<agents>.<n>` for hosts naming the agents they serve: read from the bucket.
    shardKeyPrefix ??= (await listKvKeys(bus!.connection, shardsBucketName(prefix)))
      .find((key) => /^shard[^.]*\.\d+$/.test(key))
      ?.split(".")[0];
    if (shardKeyPrefix === undefined) return undefined;
    const entry = await shards.get(`${shardKeyPrefix}.${shard}`);
    if (entry === null || entry.operation !== "PUT") return undefined;
    const record = entry.json<{ host?: string; released?: boolean }>();
    return record.host === undefined ? undefined : { host: record.host, released: record.released === true };
  };

  try {
    provider = await startFakeProvider("openai-chat", { script: modelScript(counterFile) });
    bus = await NatsBus.connect({ url: natsUrl, name: "failover-soak" });
    const slots = Array.from({ length: hostCount }, (_, slot) => slot + 1);
    const slotOf = new Map<string, number>();
    for (const slot of slots) slotOf.set(startHost(slot).id, slot);
    await Promise.all([...hosts.values()].map(waitForHost));
    store = await NatsHistoryStore.open(bus.connection, { prefix });

    const points = options.points ?? KILL_POINTS;
    for (let run = 1; run <= options.runs; run++) {
      const point = points[(run - 1) % points.length]!;
      const isHandOff = point === "handoff-old" || point === "handoff-new";
      // A hand-off run's joiner is one host beyond the cluster's size, for the length of the run.
      const joinerId = nextHostId(hostCount + 1);
      const session = isHandOff
        ? sessionMovingTo(joinerId, [...hosts.keys()], `soak-${options.seed}-${run}`)
        : `soak-${options.seed}-${run}`;
      const events: SoakEvent[] = [];
      const subscription: Subscription = bus.subscribe(
        sessionEventsPattern(prefix, AGENT, session),
        (message) => {
          const event = JSON.parse(message.data) as Omit<SoakEvent, "at">;
          events.push({ kind: event.kind, host: event.host, chatId: event.chatId, at: performance.now() });
        },
      );
      await bus.flush();
      const count = (kind: string) => events.filter((event) => event.kind === kind).length;
      const requests: TrackedRequest[] = [];
      let killedAt = Number.POSITIVE_INFINITY;
      let firstReplyAfterKill = Number.POSITIVE_INFINITY;

      const attempt = (request: TrackedRequest, timeoutMs: number, isRetry: boolean) =>
        bus!
          .request(
            chatSubject(prefix, AGENT),
            JSON.stringify({ session, text: request.text, id: request.id }),
            {
              timeoutMs,
            },
          )
          .then(
            (reply) => {
              report.replies++;
              const at = performance.now();
              if (at > killedAt) firstReplyAfterKill = Math.min(firstReplyAfterKill, at);
              const parsed = parseChatReply(reply.data);
              if (!parsed.ok) request.errors.push(`unparsable reply ${reply.data.slice(0, 200)}`);
              else if (parsed.value.ok) request.results.push(parsed.value.result);
              // Retryable by contract: the client sends the same id again, as it does after a timeout.
              else if (parsed.value.error.code === "unavailable") {
                report.unavailableReplies++;
                request.unavailable++;
              } else request.errors.push(`${parsed.value.error.code}: ${parsed.value.error.message}`);
            },
            () => {
              // A timeout: the id is retried.
              if (isRetry) report.lostRetries++;
              else report.unansweredFirstAttempts++;
            },
          );
      const send = (text: string) => {
        const request: TrackedRequest = {
          id: `${session}-m${requests.length + 1}`,
          text,
          results: [],
          errors: [],
          unavailable: 0,
        };
        requests.push(request);
        report.requests++;
        request.first = attempt(request, FIRST_ATTEMPT_TIMEOUT_MS, false);
        pending.push(request.first);
        return request;
      };
      const answered = (request: TrackedRequest) => request.results.length + request.errors.length > 0;

      // The first chat; the kill point decides what comes next.
      let reached = false;
      let victim: Host | undefined;
      let joiner: Host | undefined;
      let missed = "";
      if (!isHandOff) {
        const withTool = point === "mid-tool" || (point === "queued" && random() < 0.5);
        send(`r${run}m1 ${withTool ? "[tool] " : ""}first message of ${session}`);
        if (point === "mid-stream") {
          const deltas = 1 + Math.floor(random() * (TEXT_DELTAS - 2));
          if (random() < 0.5) send(`r${run}m2 queued behind the stream`);
          reached = await until(() => count("ModelTextDelta") >= deltas, 30_000);
        } else if (point === "mid-tool") {
          if (random() < 0.5) send(`r${run}m2 queued behind the tool`);
          reached = await until(() => count("ToolCallStarted") >= 1, 30_000);
          if (reached) await sleep(random() * TOOL_SECONDS * 900);
        } else {
          reached = await until(() => count("ChatStarted") >= 1, 30_000);
          send(`r${run}m2 queued second`);
          send(`r${run}m3 [tool] queued third`);
          if (reached) await sleep(100 + random() * 400);
          // At least one message still waits: fewer chats started than sent.
          reached = reached && count("ChatStarted") < requests.length;
        }
        const owner = events.findLast((event) => event.host !== undefined)?.host;
        victim = owner === undefined ? undefined : hosts.get(owner);
        if (!reached) missed = "not reached";
      } else {
        // Chats long enough to outlast the joiner's start (a second or so): the drain waits for them.
        send(`r${run}m1 ${random() < 0.5 ? "[tool] " : ""}first message of ${session}`);
        send(`r${run}m2 queued behind the first`);
        if (random() < 0.5) send(`r${run}m3 [tool] queued third`);
        reached = await until(() => count("ChatStarted") >= 1, 30_000);
        const owner = events.findLast((event) => event.host !== undefined)?.host;
        joiner = startHost(hostCount + 1);
        const shard = shardOf(AGENT, session, DEFAULT_SHARD_COUNT);
        const joined = await untilSettled(() => isMember(joiner!.id), 30_000);
        if (point === "handoff-old") {
          // The old owner saw the joiner and drains the shard (it waits for the running chats).
          if (joined) await sleep(random() * 800);
          const lease = await shardLease(shard);
          const isDraining = lease !== undefined && lease.host === owner && !lease.released;
          missed = firstUnmet([
            [reached, "no chat started"],
            [joined, "the joiner did not join"],
            [isDraining, `the shard was not being drained (its lease: ${JSON.stringify(lease)})`],
            [!requests.every(answered), "every request was answered first"],
          ]);
          victim = owner === undefined ? undefined : hosts.get(owner);
        } else {
          // Sent during the drain: the old owner serves them before it lets go, or they wait for the joiner.
          send(`r${run}m4 sent during the hand-off`);
          if (random() < 0.5) send(`r${run}m5 [tool] sent during the hand-off`);
          const taken = await untilSettled(async () => {
            const lease = await shardLease(shard);
            return lease?.host === joiner!.id && !lease.released;
          }, 30_000);
          if (taken) {
            // The old owner may have served those before it let go: one more reaches the joiner.
            send(`r${run}m${requests.length + 1} sent to the new owner`);
            await sleep(random() * 150);
          }
          missed = firstUnmet([
            [reached, "no chat started"],
            [joined, "the joiner did not join"],
            [
              taken,
              `the joiner did not take the shard (its lease: ${JSON.stringify(await shardLease(shard))})`,
            ],
            [!requests.every(answered), "every request was answered first"],
          ]);
          victim = joiner;
        }
      }
      const owner = victim?.id;
      if (missed === "" && (victim === undefined || victim.child.exitCode !== null)) {
        missed = "no live host to kill";
      }
      if (missed !== "" || victim === undefined) {
        report.missedKills++;
        log(`run ${run}: ${point} ${missed} (owner ${owner ?? "unknown"}); checking without a kill`);
      } else {
        victim.child.kill("SIGKILL");
        killedAt = performance.now();
        report.kills[point]++;
        if (point === "handoff-old") {
          // The joiner takes the killed owner's place: the cluster is back to its size.
          slotOf.set(joiner!.id, slotOf.get(victim.id)!);
          pending.push(waitForHost(joiner!).catch((error: Error) => report.violations.push(error.message)));
        } else if (point !== "handoff-new") {
          const slot = slotOf.get(victim.id)!;
          // Keep the cluster's size: a fresh process (new id) in the dead one's slot.
          const replacement = startHost(slot);
          slotOf.set(replacement.id, slot);
          pending.push(
            waitForHost(replacement).catch((error: Error) => report.violations.push(error.message)),
          );
        }
      }

      // Retry every unanswered id until answered.
      const deadline = performance.now() + RUN_DEADLINE_MS;
      let retries = 0;
      await Promise.all(
        requests.map(async (request) => {
          if (killedAt === Number.POSITIVE_INFINITY) {
            // No kill: only a reply `unavailable` (a hand-off went on meanwhile) is retried.
            await request.first;
            while (!answered(request) && request.unavailable > 0 && performance.now() < deadline) {
              report.retries++;
              retries++;
              await attempt(request, options.retryTimeoutMs ?? ATTEMPT_TIMEOUT_MS, true);
              if (!answered(request)) await sleep(100);
            }
            return;
          }
          while (!answered(request) && performance.now() < deadline) {
            report.retries++;
            retries++;
            await attempt(request, options.retryTimeoutMs ?? ATTEMPT_TIMEOUT_MS, true);
            if (!answered(request)) await sleep(100);
          }
        }),
      );
      const answeredAfterKill = performance.now() - killedAt;
      // Let the session settle (a resumed chat may still be finishing), then read its history.
      await until(() => performance.now() - (events.at(-1)?.at ?? 0) > 600, 30_000);
      subscription.unsubscribe();

      const before = report.violations.length;
      const violation = (text: string) => {
        report.violationsByPoint[point]++;
        report.violations.push(`run ${run} (${point}, ${session}): ${text}`);
      };
      report.resumed += count("ChatResumed");
      report.inDoubt += count("ToolCallInDoubt");
      if (killedAt !== Number.POSITIVE_INFINITY) {
        const byNextOwner = events.find((event) => event.at > killedAt && event.host !== owner)?.at;
        const failover = Math.min(byNextOwner ?? Number.POSITIVE_INFINITY, firstReplyAfterKill) - killedAt;
        if (Number.isFinite(failover)) {
          report.failoverMs.push(failover);
          report.failoverMsByPoint[point].push(failover);
        }
        if (requests.every(answered)) report.answeredMs.push(answeredAfterKill);
        if (options.checkFailoverTime !== false && !(failover <= ttl + 2000)) {
          violation(
            `the next owner served ${Number.isFinite(failover) ? `after ${Math.round(failover)} ms` : "never"} (limit ${ttl + 2000} ms)`,
          );
        }
      }
      for (const request of requests) {
        if (answered(request)) report.answered++;
        else violation(`${request.id} unanswered`);
        for (const error of request.errors) violation(`${request.id} answered ${error}`);
        const expected = expectedResult(request.text);
        const wrong = request.results.filter((result) => result !== expected);
        if (wrong.length > 0)
          violation(
            `${request.id} answered ${JSON.stringify(wrong[0])}, expected ${JSON.stringify(expected)}`,
          );
      }
      checkHistory(await restoreHistory(store, session), requests, violation);
      log(
        `run ${run}: ${point}${killedAt === Number.POSITIVE_INFINITY ? " (no kill)" : ` killed ${owner}`}, ${requests.length} requests, ${retries} retries${Number.isFinite(answeredAfterKill) ? `, all answered ${Math.round(answeredAfterKill)} ms after the kill` : ""}, ${report.violations.length - before} violations`,
      );
      // A joiner not killed is beyond the cluster's size: it leaves, handing its shards back.
      if (joiner !== undefined && killedAt === Number.POSITIVE_INFINITY) await retire(joiner);
    }

    // Late replies of the first attempts, then the side-effect counter.
    await Promise.allSettled(pending);
    const runsPerCall = new Map<string, number>();
    if (existsSync(counterFile)) {
      for (const line of readFileSync(counterFile, "utf8").split("\n")) {
        if (line !== "") runsPerCall.set(line, (runsPerCall.get(line) ?? 0) + 1);
      }
    }
    for (const [callId, runs] of runsPerCall) {
      report.toolRuns += runs;
      if (runs > 1) report.violations.push(`the non-idempotent tool ran ${runs} times for ${callId}`);
    }
  } finally {
    for (const host of hosts.values()) host.child.kill("SIGKILL");
    await bus?.close().catch(() => undefined);
    await provider?.close();
    await ownServer?.stop();
    await rm(directory, { recursive: true, force: true });
  }
  report.durationMs = performance.now() - started;
  return report;
}

function restoreHistory(store: NatsHistoryStore, session: string): Promise<Message[]> {
  return store.history(AGENT, session).restore();
}

function textOf(message: Message): string {
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

/** One linear conversation: each user text once, every tool call answered before the next turn. */
function checkHistory(
  messages: readonly Message[],
  requests: readonly TrackedRequest[],
  violation: (text: string) => void,
) {
  for (const request of requests) {
    const copies = messages.filter(
      (message) => message.role === "user" && textOf(message) === request.text,
    ).length;
    if (copies !== 1) violation(`${request.id}'s user message is in the history ${copies} times`);
  }
  let open = new Set<string>();
  for (const message of messages) {
    if (message.role === "tool") {
      if (!open.delete(message.toolCallId ?? ""))
        violation(`a tool result for an unknown call ${message.toolCallId}`);
      continue;
    }
    for (const callId of open) violation(`tool call ${callId} dangles (no result before the next message)`);
    open = new Set((message.toolCalls ?? []).map((call) => call.id));
  }
  for (const callId of open) violation(`tool call ${callId} dangles at the end of the history`);
}

function round(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

/** One kill point's kills, violations and failover times. */
export function pointLine(report: SoakReport, point: KillPoint): string {
  const sorted = [...report.failoverMsByPoint[point]].sort((a, b) => a - b);
  const failover =
    sorted.length === 0
      ? "no failover measured"
      : `failover p50 ${round(percentile(sorted, 50))}, max ${round(sorted.at(-1)!)}`;
  return `  ${point}: ${report.kills[point]} kills, ${report.violationsByPoint[point]} violations, ${failover}`;
}

/** The summary lines printed by `npm run soak`. */
export function summarise(report: SoakReport): string[] {
  const sorted = [...report.failoverMs].sort((a, b) => a - b);
  const answered = [...report.answeredMs].sort((a, b) => a - b);
  return [
    `runs ${report.runs} (seed ${report.seed}, ${report.hosts} hosts, lease TTL ${report.leaseTtlMs} ms) in ${round(report.durationMs)}`,
    `kills: ${KILL_POINTS.map((point) => `${point} ${report.kills[point]}`).join(", ")}; kill point missed ${report.missedKills}`,
    `requests ${report.requests}, answered ${report.answered}, replies ${report.replies}, retries ${report.retries}; no reply: first attempts ${report.unansweredFirstAttempts}, retries ${report.lostRetries}; unavailable (retried) ${report.unavailableReplies}`,
    `chats resumed ${report.resumed}, tool calls in doubt ${report.inDoubt}, non-idempotent tool runs ${report.toolRuns}`,
    sorted.length === 0
      ? "failover: no kill"
      : `failover (kill to the next owner's first event or reply): p50 ${round(percentile(sorted, 50))}, p99 ${round(percentile(sorted, 99))}, max ${round(sorted.at(-1)!)}`,
    report.answeredMs.length === 0
      ? "answered: no kill"
      : `kill to every id of the run answered: p50 ${round(percentile(answered, 50))}, p99 ${round(percentile(answered, 99))}, max ${round(answered.at(-1)!)}`,
    ...KILL_POINTS.filter((point) => report.kills[point] > 0).map((point) => pointLine(report, point)),
    `violations ${report.violations.length}`,
    ...report.violations.slice(0, 30).map((violation) => `  - ${violation}`),
    ...(report.violations.length > 30 ? [`  … and ${report.violations.length - 30} more`] : []),
  ];
}

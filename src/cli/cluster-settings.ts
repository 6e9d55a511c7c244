import { DEFAULT_LEASE_TTL_MS } from "../cluster/session-lease.js";
import { checkShardCount } from "../cluster/shard-map.js";
import { parseDuration } from "../config/runtime-config.js";
import { UsageError } from "./cli-context.js";

type Flags = Record<string, string | boolean | undefined>;

/** The settings of `serve` / `up` for several hosts on one NATS system: `--lease-ttl`, `--dedupe-window`, `--js-replicas`. */
export interface ClusterSettings {
  leaseTtlMs?: number;
  /** The clock error tolerated between hosts (at most a third of the TTL). */
  leaseSkewMs?: number;
  dedupeWindowMs?: number;
  /** Replicas of the JetStream streams and KV buckets this host creates. */
  jsReplicas?: number;
  /** How many shards the sessions are spread over; equal on every host of a system. */
  shards?: number;
  /** Sessions the journal sweeper resumes per second at most after a failover. */
  resumesPerSecond?: number;
}

const MIN_LEASE_TTL_MS = 300;
const MAX_LEASE_TTL_MS = 60 * 60 * 1000;
const MIN_DEDUPE_WINDOW_MS = 1_000;
const MAX_DEDUPE_WINDOW_MS = 7 * 24 * 60 * 60 * 1000;
/** JetStream's own bound: a stream has at most 5 replicas. */
const MAX_JS_REPLICAS = 5;
const MAX_RESUMES_PER_SECOND = 10_000;

/**
 * `--lease-ttl 10s` (AGENTLOOP_LEASE_TTL, 300ms–1h), `--lease-skew 500ms` (AGENTLOOP_LEASE_SKEW, 1ms to a
 * third of the TTL), `--dedupe-window 10m` (AGENTLOOP_DEDUPE_WINDOW,
 * 1s–7d), `--js-replicas 3` (AGENTLOOP_JS_REPLICAS, 1–5), `--shards 1024` (AGENTLOOP_SHARDS),
 * `--resume-rate 50` (AGENTLOOP_RESUME_RATE, sessions per second, 1–10000).
 */
export function clusterSettingsFrom(flags: Flags, env: NodeJS.ProcessEnv): ClusterSettings {
  const leaseTtlMs = bounded(
    pick(flags, "lease-ttl", env, "AGENTLOOP_LEASE_TTL"),
    "--lease-ttl",
    MIN_LEASE_TTL_MS,
    MAX_LEASE_TTL_MS,
    "300ms and 1h",
  );
  const skew = pick(flags, "lease-skew", env, "AGENTLOOP_LEASE_SKEW");
  const leaseSkewMs = bounded(
    skew,
    "--lease-skew",
    1,
    (leaseTtlMs ?? DEFAULT_LEASE_TTL_MS) / 3,
    "1ms and a third of --lease-ttl",
  );
  const dedupeWindowMs = bounded(
    pick(flags, "dedupe-window", env, "AGENTLOOP_DEDUPE_WINDOW"),
    "--dedupe-window",
    MIN_DEDUPE_WINDOW_MS,
    MAX_DEDUPE_WINDOW_MS,
    "1s and 7d",
  );
  const jsReplicas = replicas(pick(flags, "js-replicas", env, "AGENTLOOP_JS_REPLICAS"));
  const shards = shardCount(pick(flags, "shards", env, "AGENTLOOP_SHARDS"));
  const resumesPerSecond = resumeRate(pick(flags, "resume-rate", env, "AGENTLOOP_RESUME_RATE"));
  return {
    ...(resumesPerSecond === undefined ? {} : { resumesPerSecond }),
    ...(shards === undefined ? {} : { shards }),
    ...(leaseTtlMs === undefined ? {} : { leaseTtlMs }),
    ...(leaseSkewMs === undefined ? {} : { leaseSkewMs }),
    ...(dedupeWindowMs === undefined ? {} : { dedupeWindowMs }),
    ...(jsReplicas === undefined ? {} : { jsReplicas }),
  };
}

function replicas(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const count = /^\d$/.test(value) ? Number(value) : Number.NaN;
  if (!(count >= 1 && count <= MAX_JS_REPLICAS)) {
    throw new UsageError(`--js-replicas must be a whole number from 1 to ${MAX_JS_REPLICAS}, got "${value}"`);
  }
  return count;
}

function resumeRate(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const rate = /^\d{1,5}$/.test(value) ? Number(value) : Number.NaN;
  if (!(rate >= 1 && rate <= MAX_RESUMES_PER_SECOND)) {
    throw new UsageError(
      `--resume-rate must be a whole number of sessions per second from 1 to ${MAX_RESUMES_PER_SECOND}, got "${value}"`,
    );
  }
  return rate;
}

function shardCount(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const count = /^\d{1,6}$/.test(value) ? Number(value) : Number.NaN;
  const problem = checkShardCount(count);
  if (problem !== undefined) throw new UsageError(`--shards: ${problem} ("${value}")`);
  return count;
}

function bounded(value: string | undefined, option: string, min: number, max: number, range: string) {
  const milliseconds = parseDuration(value, option);
  if (milliseconds === undefined) return undefined;
  if (milliseconds < min || milliseconds > max) {
    throw new UsageError(`${option} must be between ${range}, got "${value}"`);
  }
  return Math.round(milliseconds);
}

function pick(flags: Flags, name: string, env: NodeJS.ProcessEnv, variable: string): string | undefined {
  const flag = flags[name];
  if (typeof flag === "string" && flag.trim() !== "") return flag.trim();
  const value = env[variable];
  return value !== undefined && value.trim() !== "" ? value.trim() : undefined;
}

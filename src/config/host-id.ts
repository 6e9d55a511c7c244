import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * A host id: one NATS subject token (letters, digits, `_` and `-`, at most 128), so it can name a
 * host in subjects, KV keys and `$SRV` metadata as it is.
 */
export const HOST_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** True when `value` can be a host id (see {@link HOST_ID_PATTERN}). */
export function isValidHostId(value: unknown): value is string {
  return typeof value === "string" && HOST_ID_PATTERN.test(value);
}

/**
 * `<host name>-<pid>-<random>`: tells two hosts (or two runs of one) apart in events, heartbeats
 * and leases. The host name's dots and other non-token characters become `-`.
 */
export function createHostId(): string {
  const name =
    hostname()
      .replace(/[^A-Za-z0-9_-]/g, "-")
      .slice(0, 64) || "host";
  return `${name}-${process.pid}-${randomBytes(3).toString("hex")}`;
}

/**
 * The permission probe a host sends at start (see src/host/permission-check.ts): one empty message
 * to a subject of each family it publishes on, so a missing publish permission is named at start
 * instead of failing silently later. Readers of those subjects skip it by this header. Leaf module:
 * imports nothing.
 */

/** Carried by every probe message (value `permissions`). */
export const PROBE_HEADER = "Agentloop-Probe";

/**
 * The token probes use where a session, host or agent name would go. Names are
 * `[A-Za-z0-9_-]`, so no real session, host or agent can be called this.
 */
export const PROBE_TOKEN = "$probe";

/**
 * Set on probes so JetStream refuses to store them: a stream over the subject answers "wrong
 * expected stream" (to nobody: probes have no reply subject) and keeps nothing.
 */
export const PROBE_EXPECTED_STREAM = "agentloop-permission-probe";

/** True for a permission probe: readers ignore it. */
export function isProbeMessage(message: { headers?: Record<string, string> }): boolean {
  return message.headers?.[PROBE_HEADER] !== undefined;
}

import { z } from "zod";

/**
 * The session heartbeat (an addition to the v1 contract): while a host works on a request for a
 * session — queued, creating the session, running the chat, draining at shutdown — it publishes
 * one of these on `<prefix>.sessions.<agent>.<session>.heartbeat` at once and then every
 * {@link HEARTBEAT_INTERVAL_MS}. A client waiting for a reply watches that subject: silence means
 * the host died (`kill -9`, a crash, a lost connection) and nobody will ever answer.
 */

/** How often a host beats for each session it works on. */
export const HEARTBEAT_INTERVAL_MS = 2_000;

/** A waiting client gives up after this long without a heartbeat (5 missed beats). */
export const HEARTBEAT_TIMEOUT_MS = 10_000;

export const SessionHeartbeat = z.object({
  /** The beating host's id (host name, process id and a random suffix). */
  host: z.string(),
  agent: z.string(),
  session: z.string(),
  /** ISO 8601. */
  ts: z.string(),
  /** The host's beat interval: a client never gives up before three of them have passed. */
  intervalMs: z.number().int().positive(),
  /** Requests for this session the host is working on (running and queued). */
  requests: z.number().int().nonnegative(),
});
export type SessionHeartbeat = z.infer<typeof SessionHeartbeat>;

/** The heartbeat in `data`, or undefined for anything else (not JSON, wrong shape). */
export function parseSessionHeartbeat(data: string): SessionHeartbeat | undefined {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return undefined;
  }
  const parsed = SessionHeartbeat.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

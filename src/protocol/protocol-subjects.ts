/**
 * Subjects of the Synadia Agent Protocol for NATS v0.3 (§2): `agents.<verb>.<agent>.<owner>.<name>`,
 * verb first. Unlike our own contract these carry no prefix: the protocol's callers look for them
 * as they are. Pure functions, shared by the host side (src/protocol/agent-protocol-host.ts).
 */

/** The protocol version this host speaks (service metadata `protocol_version`). */
export const PROTOCOL_VERSION = "0.3";

/** Every protocol agent registers a micro service of this name (§3). */
export const PROTOCOL_SERVICE_NAME = "agents";

/** The queue group of the `prompt` endpoint (§4). */
export const PROMPT_QUEUE_GROUP = "agents";

/** The instance name of an agent's registered (default) session. */
export const DEFAULT_INSTANCE = "default";

/** The owner token when `--owner` is not given. */
export const DEFAULT_OWNER = "agentloop";

export type ProtocolVerb = "prompt" | "status" | "hb";

/**
 * §2: a token is non-empty, holds no `.`, `*`, `>`, whitespace or NUL, and does not start with `$`.
 * (The spec recommends `[a-z0-9_-]{1,63}`; we accept what it allows.)
 */
export function isProtocolToken(token: string): boolean {
  return token.length > 0 && !token.startsWith("$") && !/[.*>\s\0]/.test(token);
}

/** `agents.<verb>.<agent>.<owner>.<name>`; `name` may be `*` for a subscription. */
export function protocolSubject(verb: ProtocolVerb, agent: string, owner: string, name: string): string {
  return `agents.${verb}.${agent}.${owner}.${name}`;
}

/** The 5th token (the instance / session name) of a protocol subject, or undefined if it has another shape. */
export function instanceOf(subject: string): string | undefined {
  const tokens = subject.split(".");
  if (tokens.length !== 5 || tokens[0] !== "agents") return undefined;
  return tokens[4];
}

/**
 * Subjects and names of the Synadia Agent Protocol for NATS v0.3 (§2): `agents.<verb>.<agent>.<owner>.<name>`,
 * verb first. Unlike our own contract these carry no prefix: the protocol's callers look for them
 * as they are. Pure functions, shared by the host side (agent-protocol-host.ts) and the caller
 * side (agent-client.ts, discovery.ts, heartbeat-watch.ts).
 */

/** The protocol version this implementation speaks (service metadata `protocol_version`). */
export const PROTOCOL_VERSION = "0.3";

/** Every protocol agent registers a micro service of this name (§3). */
export const PROTOCOL_SERVICE_NAME = "agents";

/** The queue group of the `prompt` endpoint (§4). */
export const PROMPT_QUEUE_GROUP = "agents";

/** Discovery: every `agents` service answers with its info (§4). */
export const DISCOVERY_SUBJECT = `$SRV.INFO.${PROTOCOL_SERVICE_NAME}`;

/** Every heartbeat on the system (§8). */
export const HEARTBEATS_PATTERN = "agents.hb.*.*.*";

/** The instance name of an agent's registered (default) session. */
export const DEFAULT_INSTANCE = "default";

/** The owner token when `--owner` is not given. */
export const DEFAULT_OWNER = "agentloop";

/** The verbs of protocol subjects (`agents.<verb>.<agent>.<owner>.<name>`). */
export type ProtocolVerb = "prompt" | "status" | "hb";

/** Who an agent instance is: the three tokens after the verb. */
export interface AgentAddress {
  agent: string;
  owner: string;
  name: string;
}

/**
 * §2: a token is non-empty, holds no `.`, `*`, `>`, whitespace or NUL, and does not start with `$`.
 * (The spec recommends `[a-z0-9_-]{1,63}`; we accept what it allows.)
 */
export function isProtocolToken(token: unknown): token is string {
  return typeof token === "string" && token.length > 0 && !token.startsWith("$") && !/[.*>\s\0]/.test(token);
}

/** `agents.<verb>.<agent>.<owner>.<name>`; `name` may be `*` for a subscription. */
export function protocolSubject(verb: ProtocolVerb, agent: string, owner: string, name: string): string {
  return `agents.${verb}.${agent}.${owner}.${name}`;
}

/** The subject of `verb` for an address read off the wire, or undefined when a token is not valid. */
export function protocolSubjectOf(verb: ProtocolVerb, address: AgentAddress): string | undefined {
  const { agent, owner, name } = address;
  if (!isProtocolToken(agent) || !isProtocolToken(owner) || !isProtocolToken(name)) return undefined;
  return protocolSubject(verb, agent, owner, name);
}

/** Reads `agents.<verb>.<agent>.<owner>.<name>`; undefined for anything else. */
export function parseProtocolSubject(subject: string): ({ verb: ProtocolVerb } & AgentAddress) | undefined {
  const tokens = subject.split(".");
  if (tokens.length !== 5 || tokens[0] !== "agents") return undefined;
  const [, verb, agent, owner, name] = tokens as [string, string, string, string, string];
  if (verb !== "prompt" && verb !== "status" && verb !== "hb") return undefined;
  if (!isProtocolToken(agent) || !isProtocolToken(owner) || !isProtocolToken(name)) return undefined;
  return { verb, agent, owner, name };
}

/** The 5th token (the instance / session name) of a protocol subject, or undefined if it has another shape. */
export function instanceOf(subject: string): string | undefined {
  const tokens = subject.split(".");
  if (tokens.length !== 5 || tokens[0] !== "agents") return undefined;
  return tokens[4];
}

/**
 * Service metadata key (an extra the spec lets callers keep) naming the subject prefix of our own
 * NATS contract that reaches the agent: agentloop's doors list the agents of one prefix by it.
 */
export const CONTRACT_PREFIX_METADATA = "agentloop_prefix";

import type { EventKind } from "../events/types.js";

/**
 * Subject building and matching for the v1 NATS contract. Pure functions: the host, the
 * logger, the UI and both bus implementations share them, so `LocalBus` and a real nats-server
 * agree on what a subject means.
 *
 * Layout: `<prefix>.agents.<agent>.chat`, `<prefix>.agents.<agent>.control`,
 * `<prefix>.events.<agent>.<session>.<Kind>`, `<prefix>.sessions.<agent>.<session>.heartbeat`.
 */

/** The default subject prefix. */
export const DEFAULT_PREFIX = "agentloop";

/** Agent and session names: one NATS token, no wildcards, no dots, no whitespace. */
export const NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The verbs of our request subjects (`<prefix>.agents.<agent>.<verb>`). The Agent Protocol's
 * subjects have verbs of their own (`ProtocolVerb` in src/protocol/protocol-subjects.ts).
 */
export type RequestVerb = "chat" | "control";

/** True when `name` can be an agent or session name (and so a single subject token). */
export function isValidName(name: unknown): name is string {
  return typeof name === "string" && NAME_PATTERN.test(name);
}

/**
 * True when `prefix` is usable as a subject prefix: one or more dot-separated literal tokens
 * (e.g. `agentloop` or `acme.agentloop`).
 */
export function isValidPrefix(prefix: string): boolean {
  return isValidSubject(prefix);
}

/**
 * The name of one of agentloop's JetStream streams or KV buckets: `AGENTLOOP_<SUFFIX>` for the
 * default prefix, `<PREFIX>_<SUFFIX>` otherwise (the prefix upper-cased, characters a stream name
 * may not hold as `_`), so hosts with different prefixes on one server keep separate streams
 * (two streams may not claim overlapping subjects).
 */
export function jetStreamName(prefix: string, suffix: string): string {
  const tenant = TENANT_PREFIX.exec(prefix);
  if (tenant !== null) {
    // A tenant keeps its case: tenants `acme` and `ACME` must not share a bucket.
    return `${jetStreamName(tenant[1]!, "TENANT")}_${tenant[2]}_${suffix}`;
  }
  return `${prefix.toUpperCase().replace(/[^A-Z0-9_-]/g, "_")}_${suffix}`;
}

/** `<prefix>.tenant.<tenant>`, as {@link tenantPrefix} builds it. */
const TENANT_PREFIX = /^(.+)\.tenant\.([A-Za-z0-9_-]{1,64})$/;

/**
 * `<prefix>.tenant.<tenant>`: the prefix everything of one tenant lives under on the hosts' side
 * (requests, events, heartbeats, forwarding, and the JetStream streams and buckets named after
 * it). A tenant's own account sees its subjects without `tenant.<tenant>` (see
 * examples/multi-tenant/nats.conf); the hosts tell tenants apart by this token.
 */
export function tenantPrefix(prefix: string, tenant: string): string {
  return `${prefix}.tenant.${tenant}`;
}

/** `<prefix>.tenant.*.agents.*.<verb>`: one subscription takes every tenant's requests. */
export function tenantRequestsPattern(prefix: string, verb: RequestVerb): string {
  return `${prefix}.tenant.*.agents.*.${verb}`;
}

/**
 * The tenant of a request received on `<prefix>.tenant.<tenant>.agents.…`: `{ tenant }`, or
 * `{ invalid }` with the reason when the token cannot be a tenant name (it must match
 * {@link NAME_PATTERN}), or undefined for a subject that names no tenant.
 */
export function tenantOf(
  prefix: string,
  subject: string,
): { tenant: string; invalid?: undefined } | { invalid: string; tenant?: undefined } | undefined {
  const head = `${prefix}.tenant.`;
  if (!subject.startsWith(head)) return undefined;
  const token = subject.slice(head.length).split(".", 1)[0] ?? "";
  if (!isValidName(token)) {
    return {
      invalid: `invalid tenant name ${JSON.stringify(token)}: a tenant matches ${NAME_PATTERN.source}`,
    };
  }
  return { tenant: token };
}

/**
 * `<prefix>.agents.<agent>.chat`: request/reply for chat messages.
 *
 * @example
 * ```ts
 * import { ChatReply, chatSubject, DEFAULT_PREFIX, NatsBus } from "agentloop/bus";
 *
 * const bus = await NatsBus.connect({ url: "nats://127.0.0.1:4222" });
 * const reply = await bus.request(chatSubject(DEFAULT_PREFIX, "assistant"), JSON.stringify({ session: "s1", text: "hi" }));
 * const answer = ChatReply.parse(JSON.parse(reply.data));
 * console.log(answer.ok ? answer.result : answer.error.message);
 * await bus.close();
 * ```
 */
export function chatSubject(prefix: string, agent: string): string {
  return `${prefix}.agents.${agent}.chat`;
}

/**
 * `<prefix>.agents.<agent>.control`: request/reply for a session's commands: stop, new, compact,
 * and approve / deny of a held tool call.
 *
 * @example
 * ```ts
 * import { controlSubject, LocalBus } from "agentloop/bus";
 *
 * const bus = new LocalBus(); // the bus a host serves on (startHost({ bus, … }))
 * const approve = { session: "s1", command: "approve", toolCallId: "call_1" };
 * const reply = await bus.request(controlSubject("agentloop", "assistant"), JSON.stringify(approve));
 * console.log(reply.data); // {"ok":true} once the call was held and is now approved
 * ```
 */
export function controlSubject(prefix: string, agent: string): string {
  return `${prefix}.agents.${agent}.control`;
}

/** `<prefix>.agents.*.*`: what a host subscribes to so that one subscription serves every agent. */
export function agentRequestsPattern(prefix: string): string {
  return `${prefix}.agents.*.*`;
}

/**
 * `<prefix>.events.<agent>.<session>.<Kind>`. On the hot path (one call per text delta), so it
 * only concatenates: names are validated where they enter the system.
 *
 * @example
 * ```ts
 * import { eventSubject } from "agentloop/bus";
 *
 * eventSubject("agentloop", "assistant", "s1", "ChatCompleted"); // "agentloop.events.assistant.s1.ChatCompleted"
 * ```
 */
export function eventSubject(prefix: string, agent: string, session: string, kind: EventKind): string {
  return prefix + ".events." + agent + "." + session + "." + kind;
}

/**
 * `<prefix>.events.>`: every event (also the subject set of the JetStream event log).
 *
 * @example
 * ```ts
 * import { allEventsPattern, NatsBus } from "agentloop/bus";
 * import { parseEventJson } from "agentloop/events";
 *
 * const bus = await NatsBus.connect({ url: "nats://127.0.0.1:4222" });
 * bus.subscribe(allEventsPattern("agentloop"), (message) => {
 *   const parsed = parseEventJson(message.data);
 *   if (parsed.status === "known") console.log(parsed.event.agent, parsed.event.session, parsed.event.kind);
 * });
 * ```
 */
export function allEventsPattern(prefix: string): string {
  return `${prefix}.events.>`;
}

/**
 * `<prefix>.events.<agent|*>.<session|*>.>`: the events of one agent and/or session.
 *
 * @param agent The agent's name; `"*"`, the default, for every agent.
 * @param session The session; `"*"`, the default, for every session.
 *
 * @example
 * ```ts
 * import { sessionEventsPattern } from "agentloop/bus";
 *
 * sessionEventsPattern("agentloop", "assistant", "s1"); // "agentloop.events.assistant.s1.>"
 * sessionEventsPattern("agentloop", undefined, "s1"); // "agentloop.events.*.s1.>": s1 of any agent
 * ```
 */
export function sessionEventsPattern(prefix: string, agent = "*", session = "*"): string {
  return `${prefix}.events.${agent}.${session}.>`;
}

/**
 * `<prefix>.sessions.<agent>.<session>.heartbeat`: while a host works on a request for the
 * session, it publishes here periodically, so a waiting client notices a vanished host.
 */
export function sessionHeartbeatSubject(prefix: string, agent: string, session: string): string {
  return `${prefix}.sessions.${agent}.${session}.heartbeat`;
}

/**
 * Reads a request subject, `<prefix>.agents.<agent>.<verb>`. Returns undefined for anything else: another prefix,
 * an invalid agent name, an unknown verb, extra tokens.
 */
export function parseRequestSubject(
  prefix: string,
  subject: string,
): { agent: string; verb: RequestVerb } | undefined {
  const head = `${prefix}.agents.`;
  if (!subject.startsWith(head)) return undefined;
  const rest = subject.slice(head.length).split(".");
  if (rest.length !== 2) return undefined;
  const [agent, verb] = rest as [string, string];
  if (!isValidName(agent)) return undefined;
  if (verb !== "chat" && verb !== "control") return undefined;
  return { agent, verb };
}

const WHITESPACE = /\s/;

/**
 * True for a subject one may publish to: non-empty dot-separated tokens, no whitespace, and no
 * wildcard tokens (`*`, `>`). Scans characters without allocating: it runs on every publish.
 */
export function isValidSubject(subject: string): boolean {
  const length = subject.length;
  if (length === 0) return false;
  let tokenStart = 0;
  for (let index = 0; index <= length; index++) {
    const code = index === length ? 46 : subject.charCodeAt(index);
    if (code === 46 /* . */) {
      const tokenLength = index - tokenStart;
      if (tokenLength === 0) return false;
      if (tokenLength === 1) {
        const only = subject.charCodeAt(tokenStart);
        if (only === 42 /* * */ || only === 62 /* > */) return false;
      }
      tokenStart = index + 1;
    } else if (isForbiddenChar(subject, index, code)) {
      return false;
    }
  }
  return true;
}

/**
 * True for a subscription pattern: non-empty dot-separated tokens, no whitespace, `>` only as the
 * last token. `*` and `>` are wildcards only as whole tokens (`a*` is a literal token), as in NATS.
 */
export function isValidPattern(pattern: string): boolean {
  if (pattern.length === 0) return false;
  for (let index = 0; index < pattern.length; index++) {
    if (isForbiddenChar(pattern, index, pattern.charCodeAt(index))) return false;
  }
  const tokens = pattern.split(".");
  for (let index = 0; index < tokens.length; index++) {
    const token = tokens[index]!;
    if (token.length === 0) return false;
    if (token === ">" && index !== tokens.length - 1) return false;
  }
  return true;
}

/** Whitespace and control characters: NATS would split the protocol line on them. */
function isForbiddenChar(text: string, index: number, code: number): boolean {
  if (code <= 32 || code === 127) return true;
  return code > 127 && WHITESPACE.test(text[index]!);
}

/**
 * Matches already-split tokens: `*` matches exactly one token, a trailing `>` one or more.
 * Exposed so that a bus can split each pattern once and each subject once per publish.
 */
export function tokensMatch(patternTokens: readonly string[], subjectTokens: readonly string[]): boolean {
  const patternLength = patternTokens.length;
  for (let index = 0; index < patternLength; index++) {
    const token = patternTokens[index]!;
    if (token === ">") return subjectTokens.length > index;
    if (index >= subjectTokens.length) return false;
    if (token !== "*" && token !== subjectTokens[index]) return false;
  }
  return subjectTokens.length === patternLength;
}

/** NATS wildcard matching: `*` = one token, `>` = one or more trailing tokens. */
export function subjectMatches(pattern: string, subject: string): boolean {
  return tokensMatch(pattern.split("."), subject.split("."));
}

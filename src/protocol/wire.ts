import { z } from "zod";

/**
 * The wire of the Synadia Agent Protocol for NATS, v0.3 (see
 * /work/shared/interop/nats-agent-protocol.md): subject tokens, the discovery record, heartbeats
 * and the chunks of a streamed reply. Pure: no connection here, so callers and hosts share it and
 * it is tested without a server.
 */

/** The micro service name every protocol agent registers under (§3). */
export const AGENTS_SERVICE_NAME = "agents";
/** The protocol version this implementation speaks. */
export const PROTOCOL_VERSION = "0.3";
/** The queue group of every prompt endpoint (§4). */
export const PROMPT_QUEUE = "agents";
/** Discovery: every `agents` service answers with its info (§4). */
export const DISCOVERY_SUBJECT = `$SRV.INFO.${AGENTS_SERVICE_NAME}`;
/** Every heartbeat on the system (§8). */
export const HEARTBEATS_PATTERN = "agents.hb.*.*.*";
/** The per-stream inactivity limit callers use by default (§6). */
export const DEFAULT_INACTIVITY_MS = 60_000;
/** The header that marks an error reply, with its status code (§9). */
export const ERROR_CODE_HEADER = "Nats-Service-Error-Code";
/** The header with the error's description (§9). */
export const ERROR_HEADER = "Nats-Service-Error";

/** The verbs of v0.3 subjects (`agents.<verb>.<agent>.<owner>.<name>`). */
export type AgentVerb = "prompt" | "status" | "hb";

/**
 * True when `token` may be one token of a protocol subject (§2): non-empty, no `.`, `*`, `>`,
 * whitespace or NUL, not starting with `$`.
 */
export function isValidToken(token: unknown): token is string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is one of the forbidden characters.
  return typeof token === "string" && token !== "" && !token.startsWith("$") && !/[.*>\s\u0000]/.test(token);
}

/** Who an agent instance is: the three tokens after the verb. */
export interface AgentAddress {
  agent: string;
  owner: string;
  name: string;
}

/** `agents.<verb>.<agent>.<owner>.<name>`, or undefined when a token is not valid. */
export function agentSubject(verb: AgentVerb, address: AgentAddress): string | undefined {
  const { agent, owner, name } = address;
  if (!isValidToken(agent) || !isValidToken(owner) || !isValidToken(name)) return undefined;
  return `agents.${verb}.${agent}.${owner}.${name}`;
}

/** Reads `agents.<verb>.<agent>.<owner>.<name>`; undefined for anything else. */
export function parseAgentSubject(subject: string): ({ verb: AgentVerb } & AgentAddress) | undefined {
  const tokens = subject.split(".");
  if (tokens.length !== 5 || tokens[0] !== "agents") return undefined;
  const [, verb, agent, owner, name] = tokens as [string, string, string, string, string];
  if (verb !== "prompt" && verb !== "status" && verb !== "hb") return undefined;
  if (!isValidToken(agent) || !isValidToken(owner) || !isValidToken(name)) return undefined;
  return { verb, agent, owner, name };
}

/** One endpoint of a discovery record. */
export const ServiceEndpoint = z.looseObject({
  name: z.string(),
  subject: z.string().min(1),
  queue_group: z.string().optional(),
  metadata: z.record(z.string(), z.string()).nullish(),
});
export type ServiceEndpoint = z.infer<typeof ServiceEndpoint>;

/** A `$SRV.INFO` reply (the NATS micro info response); unknown keys are kept. */
export const ServiceInfo = z.looseObject({
  name: z.string(),
  id: z.string().min(1),
  version: z.string().optional(),
  description: z.string().optional(),
  metadata: z.record(z.string(), z.string()).nullish(),
  endpoints: z.array(ServiceEndpoint).nullish(),
});
export type ServiceInfo = z.infer<typeof ServiceInfo>;

/** A heartbeat (§8), also the `status` endpoint's answer. */
export const Heartbeat = z.looseObject({
  // agent, owner and ts are in every heartbeat the notes show; the subject names the first two
  // anyway, and nothing here needs the sender's clock, so a sender leaving them out is tolerated.
  agent: z.string().optional(),
  owner: z.string().optional(),
  session: z.string().optional(),
  instance_id: z.string().min(1),
  ts: z.union([z.string(), z.number()]).optional(),
  interval_s: z.number().positive(),
});
export type Heartbeat = z.infer<typeof Heartbeat>;

/** Parses JSON text against `schema`; undefined when it is not JSON or does not match. */
export function parseJson<Schema extends z.ZodType>(
  schema: Schema,
  text: string,
): z.output<Schema> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

const StatusChunk = z.object({ type: z.literal("status"), data: z.unknown().optional() });
const ResponseChunk = z.object({
  type: z.literal("response"),
  data: z.union([z.string(), z.looseObject({ text: z.string().optional() })]),
});
const QueryChunk = z.object({
  type: z.literal("query"),
  data: z.looseObject({ id: z.string().optional(), reply_subject: z.string().min(1), prompt: z.string() }),
});

/** One message of a streamed reply (§6, §9), as a caller sees it. */
export type ReplyChunk =
  /** `status` (the mandatory `ack`, then keep-alives): resets the inactivity timer. */
  | { type: "status"; status: string }
  /** Content to append. */
  | { type: "response"; text: string }
  /** The agent asks the caller something mid-stream (§7). */
  | { type: "query"; id: string | undefined; replySubject: string; prompt: string }
  /** An error reply (headers `Nats-Service-Error-Code` / `Nats-Service-Error`). */
  | { type: "error"; code: number; description: string }
  /** The terminator: an empty body and no headers. */
  | { type: "end" }
  /** An unknown chunk type or a body that is not a chunk: callers ignore it. */
  | { type: "ignored"; reason: string };

/**
 * Reads one message of a reply stream. Headers win: an error code header makes it an error
 * (whatever the body); any other header-carrying empty message is not the terminator.
 */
export function parseReplyChunk(
  data: string,
  headers: Readonly<Record<string, string>> | undefined,
): ReplyChunk {
  const code = headers === undefined ? undefined : headerValue(headers, ERROR_CODE_HEADER);
  if (code !== undefined) {
    const numeric = Number.parseInt(code, 10);
    return {
      type: "error",
      code: Number.isFinite(numeric) ? numeric : 500,
      description: (headers && headerValue(headers, ERROR_HEADER)) || "the agent reported an error",
    };
  }
  const hasHeaders = headers !== undefined && Object.keys(headers).length > 0;
  if (data === "")
    return hasHeaders ? { type: "ignored", reason: "an empty message with headers" } : { type: "end" };
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return { type: "ignored", reason: "not JSON" };
  }
  const status = StatusChunk.safeParse(value);
  if (status.success) {
    return { type: "status", status: typeof status.data.data === "string" ? status.data.data : "" };
  }
  const response = ResponseChunk.safeParse(value);
  if (response.success) {
    const { data: content } = response.data;
    return { type: "response", text: typeof content === "string" ? content : (content.text ?? "") };
  }
  const query = QueryChunk.safeParse(value);
  if (query.success) {
    const { id, reply_subject: replySubject, prompt } = query.data.data;
    return { type: "query", id, replySubject, prompt };
  }
  const type = (value as { type?: unknown } | null)?.type;
  return { type: "ignored", reason: typeof type === "string" ? `chunk type "${type}"` : "not a chunk" };
}

/**
 * True for the server's "no responders" status (503, no body): a request to a subject nobody
 * subscribes to comes back as this on the reply inbox.
 */
export function isNoResponders(message: {
  data: Uint8Array;
  headers?: { code: number } | undefined;
}): boolean {
  return message.data.length === 0 && message.headers?.code === 503;
}

/** A header's value by case-insensitive name (senders differ in how they spell it). */
function headerValue(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const key of Object.keys(headers)) if (key.toLowerCase() === wanted) return headers[key];
  return undefined;
}

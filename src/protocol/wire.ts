import { z } from "zod";

/**
 * The wire of the Synadia Agent Protocol for NATS, v0.3: the discovery record, heartbeats, the
 * error headers and the chunks of a streamed reply, as a caller reads them (subjects are in
 * protocol-subjects.ts). Pure: no connection here, so callers and hosts share it and
 * it is tested without a server.
 */

/** The per-stream inactivity limit callers use by default (§6). */
export const DEFAULT_INACTIVITY_MS = 60_000;
/** The header that marks an error reply, with its status code (§9). */
export const ERROR_CODE_HEADER = "Nats-Service-Error-Code";
/** The header with the error's description (§9). */
export const ERROR_HEADER = "Nats-Service-Error";

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

/**
 * A heartbeat on `agents.hb.<agent>.<owner>.<name>` (§8), also the `status` endpoint's answer. The
 * one schema for both sides: this host always sends agent, owner and ts (an ISO 8601 string);
 * a reader tolerates a sender that leaves them out, since nothing it does needs them.
 */
export const Heartbeat = z.looseObject({
  // agent, owner and ts are in every heartbeat the notes show; the subject names the first two
  // anyway, and nothing here needs the sender's clock, so a sender leaving them out is tolerated.
  agent: z.string().optional(),
  owner: z.string().optional(),
  session: z.string().optional(),
  instance_id: z.string().min(1),
  ts: z.union([z.string(), z.number()]).optional(),
  // A whole number of seconds, as the reference decoders read it (an integer field): 1.5 is no heartbeat.
  interval_s: z.number().int().positive(),
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
  | {
      type: "error";
      code: number;
      description: string;
      /** The body's `code` when it carries one (an agentloop host's: `cycle`, `cancelled` …). */
      reason?: string;
    }
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
    const reason = errorBodyCode(data);
    return {
      type: "error",
      code: Number.isFinite(numeric) ? numeric : 500,
      description: (headers && headerValue(headers, ERROR_HEADER)) || "the agent reported an error",
      ...(reason === undefined ? {} : { reason }),
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

/** The `code` of an error body `{"code": …, "message": …}` (an agentloop host sends one), if any. */
function errorBodyCode(data: string): string | undefined {
  if (data === "") return undefined;
  try {
    const code = (JSON.parse(data) as { code?: unknown } | null)?.code;
    return typeof code === "string" && code.length <= 64 ? code : undefined;
  } catch {
    return undefined;
  }
}

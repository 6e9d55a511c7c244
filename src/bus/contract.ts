import { z } from "zod";
import { type ErrorCode, ReplyError } from "../contract/reply-error.js";
import { NAME_PATTERN } from "./subjects.js";

/**
 * The v1 NATS contract as zod schemas: what arrives on `<prefix>.agents.<agent>.chat`
 * and `.control`, and what goes back. Everything that comes off the wire is parsed here, so a
 * malformed request becomes a `bad_request` reply that says which field is wrong, never a crash.
 * Unknown extra fields are ignored (stripped), so newer clients can talk to older hosts.
 */

/** Largest request payload accepted (bytes of UTF-8): nats-server's default `max_payload`. */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;

export { ERROR_CODES, ErrorCode, ReplyError } from "../contract/reply-error.js";

/**
 * A string that is well-formed Unicode: no lone UTF-16 surrogate (half an emoji, which JSON can
 * carry as `"\ud83d"`). Such text would be stored and replayed on every later request of the
 * session, and providers refuse a body holding it, so it is turned away at the door.
 */
const WellFormedString = z.string().refine((text) => text.isWellFormed(), {
  error: "must be well-formed Unicode text (it holds a lone UTF-16 surrogate, e.g. half an emoji)",
});

const SessionName = z
  .string()
  .regex(NAME_PATTERN, { error: `must match ${NAME_PATTERN.source} (letters, digits, _ and -)` });

/** A chat message for one session of the agent named in the subject. */
export const ChatRequest = z.object({
  session: SessionName,
  text: WellFormedString.min(1, { error: "must not be empty" }),
  /** Mailbox message type; stackable messages of the same type coalesce (e.g. `task_result`). */
  type: WellFormedString.min(1).max(64).default("user"),
  /** When true and the session is busy, replaces a queued message of the same type. */
  stackable: z.boolean().default(false),
  /** The client's own id for the message, echoed in the reply. */
  id: WellFormedString.min(1).max(256).optional(),
});
/** A parsed chat request (defaults applied). */
export type ChatRequest = z.infer<typeof ChatRequest>;
/** What a client may send (defaults not yet applied). */
export type ChatRequestInput = z.input<typeof ChatRequest>;

export const CONTROL_COMMANDS = ["stop", "new", "compact", "approve", "deny", "cancel"] as const;

/** Out-of-band commands for one session. */
export const ControlRequest = z
  .object({
    session: SessionName,
    command: z.enum(CONTROL_COMMANDS),
    /** Focus of a `compact`. */
    topic: WellFormedString.max(4096).optional(),
    /** The held tool call an `approve` / `deny` is about (from its ToolApprovalRequested event). */
    toolCallId: WellFormedString.min(1).max(256).optional(),
    /** Why a `deny`: the model sees it in the call's result. */
    reason: WellFormedString.max(4096).optional(),
    /** The arguments text the approver saw: when given, a call with other arguments is refused. */
    arguments: z.string().optional(),
    /**
     * The chat request a `cancel` is about (the `id` it was sent with): taken out of the queue if
     * still queued (it never runs), stopped if running; the session's other chats go on.
     */
    id: WellFormedString.min(1).max(256).optional(),
  })
  .superRefine((request, context) => {
    if ((request.command === "approve" || request.command === "deny") && request.toolCallId === undefined) {
      context.addIssue({ code: "custom", path: ["toolCallId"], message: `required by "${request.command}"` });
    }
    if (request.command === "cancel" && request.id === undefined) {
      context.addIssue({ code: "custom", path: ["id"], message: 'required by "cancel"' });
    }
  });
export type ControlRequest = z.infer<typeof ControlRequest>;

/** Token usage in a reply (the common model's `TokenUsage`). */
export const ReplyUsage = z.object({
  prompt: z.number().nonnegative(),
  completion: z.number().nonnegative(),
  total: z.number().nonnegative(),
  cached: z.number().nonnegative(),
});
export type ReplyUsage = z.infer<typeof ReplyUsage>;

/** Reply to a chat request. */
export const ChatReply = z.discriminatedUnion("ok", [
  z.object({
    ok: z.literal(true),
    session: z.string(),
    result: z.string(),
    usage: ReplyUsage,
    id: z.string().optional(),
  }),
  z.object({
    ok: z.literal(false),
    error: ReplyError,
    id: z.string().optional(),
    /** The chat's id (its events carry it), when the chat ran: set with `reply_too_large`. */
    chatId: z.string().optional(),
  }),
]);
export type ChatReply = z.infer<typeof ChatReply>;

/** Reply to a control request. */
export const ControlReply = z.discriminatedUnion("ok", [
  z.object({ ok: z.literal(true) }),
  z.object({ ok: z.literal(false), error: ReplyError }),
]);
export type ControlReply = z.infer<typeof ControlReply>;

/** The outcome of parsing a payload: the value, or a `bad_request` error ready to send back. */
export type ParseResult<T> =
  | { ok: true; value: T }
  | { ok: false; error: { code: "bad_request"; message: string } };

/** A failed reply (for chat and control alike). */
export function errorReply(code: ErrorCode, message: string): { ok: false; error: ReplyError } {
  return { ok: false, error: { code, message } };
}

/** Parses a chat request payload (UTF-8 JSON). */
export function parseChatRequest(data: string): ParseResult<ChatRequest> {
  return parsePayload(ChatRequest, data, "chat request");
}

/** Parses a control request payload (UTF-8 JSON). */
export function parseControlRequest(data: string): ParseResult<ControlRequest> {
  return parsePayload(ControlRequest, data, "control request");
}

/** Parses a chat reply (for clients: the CLI, `ask_agent`). */
export function parseChatReply(data: string): ParseResult<ChatReply> {
  return parsePayload(ChatReply, data, "chat reply");
}

/** Parses a control reply. */
export function parseControlReply(data: string): ParseResult<ControlReply> {
  return parsePayload(ControlReply, data, "control reply");
}

function parsePayload<T>(schema: z.ZodType<T>, data: string, what: string): ParseResult<T> {
  // Cheap length check first: a UTF-8 string is at most 3 bytes per UTF-16 unit.
  if (data.length * 3 > MAX_PAYLOAD_BYTES) {
    const bytes = Buffer.byteLength(data, "utf8");
    if (bytes > MAX_PAYLOAD_BYTES) {
      return badRequest(`${what} too large: ${bytes} bytes (max ${MAX_PAYLOAD_BYTES})`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return badRequest(`${what} is not valid JSON`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return badRequest(`${what} must be a JSON object`);
  }
  const parsed = schema.safeParse(json);
  if (parsed.success) return { ok: true, value: parsed.data };
  return badRequest(`${what}: ${describeIssue(parsed.error.issues[0], json as Record<string, unknown>)}`);
}

function describeIssue(issue: z.core.$ZodIssue | undefined, input: Record<string, unknown>): string {
  if (issue === undefined) return "invalid";
  const field = issue.path.map(String).join(".");
  if (field === "") return issue.message;
  const [first] = issue.path;
  if (issue.path.length === 1 && input[String(first)] === undefined) {
    return `missing field "${field}"`;
  }
  return `field "${field}": ${issue.message}`;
}

function badRequest(message: string): { ok: false; error: { code: "bad_request"; message: string } } {
  return { ok: false, error: { code: "bad_request", message } };
}

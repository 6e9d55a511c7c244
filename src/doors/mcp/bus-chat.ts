import { randomUUID } from "node:crypto";
import type { Bus } from "../../bus/bus.js";
import { BusTimeoutError, NoRespondersError } from "../../bus/bus-errors.js";
import { type ChatReply, type ErrorCode, parseChatReply, parseControlReply } from "../../bus/contract.js";
import { HostSilentError, requestWithHeartbeat } from "../../bus/request-with-heartbeat.js";
import {
  chatSubject,
  controlSubject,
  sessionEventsPattern,
  sessionHeartbeatSubject,
} from "../../bus/subjects.js";
import { describeError } from "../../errors/describe-error.js";
import { parseEventJson } from "../../events/parse-event.js";
import type { EventOf } from "../../events/types.js";

/** A chat's longest run through a door (the CLI's `chat` waits as long). */
export const DOOR_CHAT_TIMEOUT_MS = 30 * 60_000;
const CONTROL_TIMEOUT_MS = 10_000;

export type ApprovalRequest = EventOf<"ToolApprovalRequested">;

export interface BusChatOptions {
  bus: Bus;
  prefix: string;
  agent: string;
  session: string;
  text: string;
  /**
   * Aborting it cancels this chat on its host (control `cancel` with the request's id: out of the
   * session's queue, or stopped if it runs; other chats of the session go on) and answers `cancelled`.
   */
  signal?: AbortSignal;
  /** A tool call of this chat waits for an approver. */
  onApprovalRequested?: (request: ApprovalRequest) => void;
  /** …and was decided (by anyone). */
  onApprovalResolved?: (toolCallId: string) => void;
  timeoutMs?: number;
}

/**
 * One chat through the bus contract, as any client sends it: the session's events are watched
 * from before the request (a held tool call shows there first), the request waits on the session's
 * heartbeat so a host that dies is noticed in seconds. Always resolves with a contract reply: a
 * transport failure becomes an `ok: false` reply with its reason.
 */
export async function chatOverBus(options: BusChatOptions): Promise<ChatReply> {
  const { bus, prefix, agent, session, signal } = options;
  const subscription = bus.subscribe(sessionEventsPattern(prefix, agent, session), (message) => {
    const parsed = parseEventJson(message.data);
    if (parsed.status !== "known") return;
    const { event } = parsed;
    if (event.kind === "ToolApprovalRequested") options.onApprovalRequested?.(event);
    else if (event.kind === "ToolApprovalResolved") options.onApprovalResolved?.(event.toolCallId);
  });
  // The request's own id: what a `cancel` names, so it reaches this chat and no other.
  const id = randomUUID();
  const onAbort = () => {
    // The host runs the chat whatever happens to this request: it is told to cancel it.
    void sendControl(bus, prefix, agent, { session, command: "cancel", id });
  };
  try {
    await bus.flush();
    signal?.addEventListener("abort", onAbort, { once: true });
    const reply = await requestWithHeartbeat(
      bus,
      chatSubject(prefix, agent),
      JSON.stringify({ session, text: options.text, id }),
      {
        heartbeatSubject: sessionHeartbeatSubject(prefix, agent, session),
        timeoutMs: options.timeoutMs ?? DOOR_CHAT_TIMEOUT_MS,
        ...(signal === undefined ? {} : { signal }),
      },
    );
    const parsed = parseChatReply(reply.data);
    if (!parsed.ok) return failure("internal", `unreadable reply from the host: ${parsed.error.message}`);
    return parsed.value;
  } catch (error) {
    if (signal?.aborted) return failure("cancelled", "the caller cancelled the chat");
    if (error instanceof NoRespondersError) {
      return failure("unknown_agent", `no agent host serves "${agent}" on prefix "${prefix}"`);
    }
    if (error instanceof HostSilentError) {
      return failure("internal", `the host serving "${agent}" stopped responding: ${error.message}`);
    }
    if (error instanceof BusTimeoutError)
      return failure("internal", `no reply from agent "${agent}" in time`);
    return failure("internal", `the request failed: ${describeError(error)}`);
  } finally {
    signal?.removeEventListener("abort", onAbort);
    subscription.unsubscribe();
  }
}

/** Approves or denies one held tool call, bound to its id and arguments; resolves with the error, if any. */
export async function decideToolCall(
  bus: Bus,
  prefix: string,
  agent: string,
  decision: { session: string; toolCallId: string; arguments: string; approved: boolean; reason?: string },
): Promise<string | undefined> {
  return sendControl(bus, prefix, agent, {
    session: decision.session,
    command: decision.approved ? "approve" : "deny",
    toolCallId: decision.toolCallId,
    arguments: decision.arguments,
    ...(decision.reason === undefined ? {} : { reason: decision.reason }),
  });
}

async function sendControl(
  bus: Bus,
  prefix: string,
  agent: string,
  command: Record<string, string>,
): Promise<string | undefined> {
  try {
    const reply = await bus.request(controlSubject(prefix, agent), JSON.stringify(command), {
      timeoutMs: CONTROL_TIMEOUT_MS,
    });
    const parsed = parseControlReply(reply.data);
    if (!parsed.ok) return parsed.error.message;
    return parsed.value.ok ? undefined : `${parsed.value.error.code}: ${parsed.value.error.message}`;
  } catch (error) {
    return describeError(error);
  }
}

function failure(code: ErrorCode, message: string): ChatReply {
  return { ok: false, error: { code, message } };
}

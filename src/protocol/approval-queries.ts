import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import type { ToolApprovalDecision } from "../agent/tool-approvals.js";
import { createConnectionInbox } from "../bus/connection-inbox.js";
import { MAX_PAYLOAD_BYTES } from "../bus/contract.js";
import { toBusMessage } from "../bus/inbound-message.js";
import { ForbiddenError } from "../errors/forbidden-error.js";
import type { EventOf } from "../events/types.js";
import { describeFailure } from "../host/describe-failure.js";
import type { CommandOutcome } from "../host/session-actor.js";
import { truncateText } from "../text/truncate-text.js";
import { parsePromptPayload } from "./prompt-envelope.js";

/** The arguments a question shows at most (a chunk stays far below any server's max payload). */
const MAX_SHOWN_ARGUMENTS = 8_000;

type ApprovalRequest = Pick<
  EventOf<"ToolApprovalRequested">,
  "toolName" | "toolCallId" | "arguments" | "heldBy"
>;

export interface ApprovalQueriesOptions {
  connection: NatsConnection;
  /** Publishes one chunk on the prompt's reply stream. */
  send(chunk: string): void;
  /** Takes a decision, as `approve` / `deny` on the control subject would. */
  decide(decision: ToolApprovalDecision): Promise<CommandOutcome>;
  /**
   * Whether the prompt's sender may decide its own chat's calls (the agent's `approval.selfApprove`).
   * Default false: the question only tells the caller what waits, and an approver decides on the
   * control subject.
   */
  acceptsSenderAnswers?: boolean;
  /** Where a refused answer is logged, one line naming the rule (once per question). Default: nowhere. */
  log?: (line: string) => void;
  /** What the log line calls the chat, e.g. `assistant/default`. */
  chatName?: string;
}

/** Why an answer on the query's inbox is refused when the sender may not approve. */
export const SELF_APPROVAL_REFUSED =
  "the prompt's sender cannot approve its own chat's tool calls: an approver decides on the agentloop control subject (approve / deny)";

/** The rule a refused self-approval broke, as its log line names it. */
export const SELF_APPROVAL_RULE = "self-approval";

/** What a caller's answer means: `yes` / `y` / `approve` approves; anything else denies. */
export function readApprovalAnswer(answer: string): { approved: boolean; reason?: string } {
  const text = answer.trim();
  if (/^(yes|y|approve)$/i.test(text)) return { approved: true };
  // "no, not now" → "not now": the leading refusal is not part of the reason.
  const reason = text.replace(/^(no|n|deny)\b[\s,;:.!-]*/i, "").trim();
  return reason === "" ? { approved: false } : { approved: false, reason };
}

/**
 * The question a `query` chunk asks about one held tool call; `isAnswerable` false: a notice that
 * the call waits for an approver (the caller's answer is not taken).
 */
export function approvalQuestion(request: ApprovalRequest, isAnswerable = true): string {
  // A call of a chat further down the agent tree, bubbled up to this one: the question names it.
  const holder =
    request.heldBy === undefined ? "" : ` (asked by ${request.heldBy.agent}/${request.heldBy.session})`;
  const call = `${request.toolName}(${truncateText(request.arguments, MAX_SHOWN_ARGUMENTS)})${holder}`;
  if (!isAnswerable) {
    return `${call} waits for an approver's decision; answers to this question are not accepted.`;
  }
  return `Approve ${call}? Answer yes or no (optionally: no, <reason>).`;
}

/**
 * Tool approval over the Agent Protocol: each tool call of a prompt's chat that waits
 * for approval is asked as a `query` chunk (`id`: the toolCallId; `reply_subject`: a fresh inbox
 * this host listens on). The caller's first answer (text, or an envelope's `prompt`) decides the
 * call. An answer sent as a request is told the outcome (`{"ok":true}` or `{"ok":false,"error"}`).
 * A call decided elsewhere (the control subject) or a stream that ends closes its inbox; a caller
 * that never answers leaves the approval pending like any other.
 *
 * The caller may answer only where the agent allows self-approval: whoever sends a prompt would
 * otherwise approve the tool calls its own prompt caused, and a tool needing approval would need
 * nothing. Otherwise the question still goes out (the caller learns what its stream waits for),
 * and every answer is refused `forbidden` with {@link SELF_APPROVAL_REFUSED} (and one log line per
 * question naming the rule); an approver decides on the
 * control subject, which NATS permissions can keep to approvers.
 */
export class ApprovalQueries {
  readonly #connection: NatsConnection;
  readonly #send: (chunk: string) => void;
  readonly #decide: (decision: ToolApprovalDecision) => Promise<CommandOutcome>;
  readonly #acceptsSenderAnswers: boolean;
  readonly #log: (line: string) => void;
  readonly #chatName: string;
  readonly #open = new Map<string, Subscription>();
  /** The questions whose refused answer was logged: a sender repeating itself is logged once. */
  readonly #loggedRefusals = new Set<string>();
  #isClosed = false;

  constructor(options: ApprovalQueriesOptions) {
    this.#connection = options.connection;
    this.#send = options.send;
    this.#decide = options.decide;
    this.#acceptsSenderAnswers = options.acceptsSenderAnswers ?? false;
    this.#log = options.log ?? (() => {});
    this.#chatName = options.chatName ?? "a chat";
  }

  /** Asks the caller about one held call. */
  ask(request: ApprovalRequest): void {
    if (this.#isClosed || this.#open.has(request.toolCallId)) return;
    const replySubject = createConnectionInbox(this.#connection);
    let subscription: Subscription;
    try {
      subscription = this.#connection.subscribe(replySubject, {
        callback: (error, message) => {
          if (error === null) void this.#answer(request, message);
        },
      });
    } catch {
      // The connection is closing: the approval stays pending (the control subject decides it).
      return;
    }
    this.#open.set(request.toolCallId, subscription);
    this.#send(
      JSON.stringify({
        type: "query",
        data: {
          id: request.toolCallId,
          reply_subject: replySubject,
          prompt: approvalQuestion(request, this.#acceptsSenderAnswers),
        },
      }),
    );
  }

  /** The call was decided (here or elsewhere): its question is over. */
  settled(toolCallId: string): void {
    const subscription = this.#open.get(toolCallId);
    if (subscription === undefined) return;
    this.#open.delete(toolCallId);
    subscription.unsubscribe();
  }

  /** The stream ended: no more answers are taken. */
  close(): void {
    this.#isClosed = true;
    for (const toolCallId of [...this.#open.keys()]) this.settled(toolCallId);
  }

  async #answer(request: ApprovalRequest, message: Msg): Promise<void> {
    if (!this.#open.has(request.toolCallId)) {
      // A second answer that came before the inbox closed.
      const reason = `tool call "${request.toolCallId}" was already answered or decided`;
      this.#respond(message, { ok: false, error: { code: "bad_request", message: reason } });
      return;
    }
    if (!this.#acceptsSenderAnswers) {
      // The question stays open for nobody: the control subject decides it.
      this.#refuse(request, message, new ForbiddenError(SELF_APPROVAL_REFUSED, SELF_APPROVAL_RULE));
      return;
    }
    const inbound = toBusMessage(message, { maxBytes: MAX_PAYLOAD_BYTES });
    const parsed =
      inbound.malformed === undefined
        ? parsePromptPayload(inbound.data)
        : ({ ok: false, reason: inbound.malformed } as const);
    if (!parsed.ok) {
      // Not an answer: the question stays open.
      this.#respond(message, { ok: false, error: { code: "bad_request", message: parsed.reason } });
      return;
    }
    this.settled(request.toolCallId);
    const answer = readApprovalAnswer(parsed.value.prompt);
    let outcome: CommandOutcome;
    try {
      outcome = await this.#decide({
        toolCallId: request.toolCallId,
        arguments: request.arguments,
        approved: answer.approved,
        ...(answer.reason === undefined ? {} : { reason: answer.reason }),
      });
    } catch (error) {
      outcome = { ok: false, error: describeFailure(error) };
    }
    this.#respond(message, outcome);
  }

  /** Answers `forbidden` and logs the first refusal of each question with the rule it broke. */
  #refuse(request: ApprovalRequest, message: Msg, refusal: ForbiddenError): void {
    if (!this.#loggedRefusals.has(request.toolCallId)) {
      this.#loggedRefusals.add(request.toolCallId);
      this.#log(
        `refused an answer to the approval query of ${request.toolName} call ${request.toolCallId} in ${this.#chatName} (rule: ${refusal.rule}): ${refusal.message}`,
      );
    }
    this.#respond(message, { ok: false, error: describeFailure(refusal) });
  }

  #respond(message: Msg, outcome: CommandOutcome): void {
    if (message.reply === undefined || message.reply === "") return;
    try {
      message.respond(JSON.stringify(outcome));
    } catch {
      // The connection is closing.
    }
  }
}

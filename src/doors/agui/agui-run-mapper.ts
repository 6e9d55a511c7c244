import { type Event as AguiEvent, EventType, type Interrupt, type TokenUsage } from "@ag-ui/core";
import type { AgentEvent, EventOf } from "../../events/types.js";
import { formatInterruptId, messageIds, pointerToken } from "./agui-ids.js";

/** Where the statechart states live in the run's AG-UI state: `{ statechart: { <machine>: <value> } }`. */
export const STATE_KEY = "statechart";

/** The answer schema of an approval interrupt: what a resume entry's `payload` holds. */
export const APPROVAL_RESPONSE_SCHEMA = {
  type: "object",
  properties: {
    approved: { type: "boolean", description: "true runs the call, false denies it" },
    reason: { type: "string", description: "why it was denied; the model sees it" },
  },
  required: ["approved"],
} as const;

export interface RunMapperOptions {
  threadId: string;
  runId: string;
  /** The chat this run follows; other chats' events are not its own. */
  chatId: string;
  /** Tool calls the client already holds (from the history snapshot): not announced again. */
  knownToolCalls?: Iterable<string>;
  /** Approvals this run was started to answer: they do not interrupt it again. */
  answeredApprovals?: Iterable<string>;
}

/**
 * Turns one chat's agentloop events into AG-UI events, one agentloop event at a time, as a pure
 * state machine (same input, same output: a reconnect rebuilds a run by mapping the log again).
 *
 * - each model request is a step `iteration <n>`, each tool run a step `tool <name> <toolCallId>`;
 * - text deltas are a text message per model request (and per stream attempt), reasoning deltas a
 *   reasoning message;
 * - a stream reset (the provider's stream broke and the request starts over) ends the text shown
 *   so far with a visible note, `[stream interrupted: <reason>; the answer starts again]`, and a
 *   CUSTOM `agentloop.stream_reset` event; the new attempt streams into a new message;
 * - a call that waits for approval ends the run with the `interrupt` outcome (one interrupt per run);
 * - StateChanged becomes a STATE_DELTA of `/statechart/<machine>`;
 * - ChatCompleted ends the run with RUN_FINISHED, ChatFailed with RUN_ERROR (a cancelled chat with
 *   the `cancelled` outcome).
 */
export class AguiRunMapper {
  readonly #options: RunMapperOptions;
  readonly #knownToolCalls: Set<string>;
  readonly #answered: Set<string>;
  readonly #attempts = new Map<number, number>();
  readonly #toolSteps = new Map<string, string>();
  #text: string | undefined;
  #reasoning: string | undefined;
  #iterationStep: { iteration: number; name: string } | undefined;
  #isDone = false;

  constructor(options: RunMapperOptions) {
    this.#options = options;
    this.#knownToolCalls = new Set(options.knownToolCalls ?? []);
    this.#answered = new Set(options.answeredApprovals ?? []);
  }

  /** True once the run ended (RUN_FINISHED or RUN_ERROR was made): later events are not its own. */
  get isDone(): boolean {
    return this.#isDone;
  }

  /** The AG-UI events one agentloop event (stored at `seq`) becomes. */
  map(event: AgentEvent, seq: number): AguiEvent[] {
    if (this.#isDone) return [];
    const out: AguiEvent[] = [];
    if (event.chatId !== this.#options.chatId) {
      // The session machine's own state (chatId "") belongs to every run of the session.
      if (event.kind === "StateChanged" && event.chatId === "") out.push(stateDelta(event));
      return out;
    }
    if (event.iteration >= 1 && this.#iterationStep?.iteration !== event.iteration) {
      this.#closeMessages(out);
      this.#closeStep(out);
      const name = `iteration ${event.iteration}`;
      this.#iterationStep = { iteration: event.iteration, name };
      out.push({ type: EventType.STEP_STARTED, stepName: name });
    }
    switch (event.kind) {
      case "ModelStreamSegmentStart":
        this.#attempts.set(event.iteration, event.attempt);
        break;
      case "ModelTextDelta":
        if (event.delta === "") break;
        this.#closeReasoning(out);
        if (this.#text === undefined) {
          this.#text = this.#assistantId(event.iteration);
          out.push({ type: EventType.TEXT_MESSAGE_START, messageId: this.#text, role: "assistant" });
        }
        out.push({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: this.#text, delta: event.delta });
        break;
      case "ModelReasoningDelta":
        if (event.delta === "") break;
        this.#closeText(out);
        if (this.#reasoning === undefined) {
          const id = messageIds.reasoning(
            this.#options.chatId,
            event.iteration,
            this.#attempt(event.iteration),
          );
          this.#reasoning = id;
          out.push({ type: EventType.REASONING_START, messageId: id });
          out.push({ type: EventType.REASONING_MESSAGE_START, messageId: id, role: "reasoning" });
        }
        out.push({
          type: EventType.REASONING_MESSAGE_CONTENT,
          messageId: this.#reasoning,
          delta: event.delta,
        });
        break;
      case "ModelStreamSegmentReset": {
        const messageId = this.#text;
        if (messageId !== undefined) {
          out.push({
            type: EventType.TEXT_MESSAGE_CONTENT,
            messageId,
            delta: `\n\n[stream interrupted: ${event.reason}; the answer starts again]`,
          });
        }
        this.#closeMessages(out);
        out.push({
          type: EventType.CUSTOM,
          name: "agentloop.stream_reset",
          value: {
            iteration: event.iteration,
            attempt: event.attempt,
            reason: event.reason,
            ...(messageId === undefined ? {} : { messageId }),
          },
        });
        this.#attempts.set(event.iteration, event.attempt + 1);
        break;
      }
      case "ModelResponse":
        if (event.purpose !== "compaction") this.#closeMessages(out);
        break;
      case "ToolApprovalRequested":
        this.#announce(out, event);
        if (this.#answered.has(event.toolCallId)) break;
        this.#finish(out, {
          type: EventType.RUN_FINISHED,
          threadId: this.#options.threadId,
          runId: this.#options.runId,
          outcome: { type: "interrupt", interrupts: [approvalInterrupt(event, seq)] },
        });
        break;
      case "ToolApprovalResolved":
        if (!event.approved) {
          out.push({
            type: EventType.TOOL_CALL_RESULT,
            messageId: messageIds.tool(this.#options.chatId, event.toolCallId),
            toolCallId: event.toolCallId,
            role: "tool",
            content: JSON.stringify({ error: "denied", ...(event.reason ? { reason: event.reason } : {}) }),
          });
        }
        break;
      case "ToolCallStarted": {
        this.#closeMessages(out);
        this.#announce(out, event);
        const name = `tool ${event.toolName} ${event.toolCallId}`;
        if (!this.#toolSteps.has(event.toolCallId)) {
          this.#toolSteps.set(event.toolCallId, name);
          out.push({ type: EventType.STEP_STARTED, stepName: name });
        }
        break;
      }
      case "ToolCallInDoubt":
        this.#announce(out, event);
        break;
      case "ToolCallCompleted":
      case "ToolCallFailed": {
        this.#announce(out, { ...event, arguments: "" });
        out.push({
          type: EventType.TOOL_CALL_RESULT,
          messageId: messageIds.tool(this.#options.chatId, event.toolCallId),
          toolCallId: event.toolCallId,
          role: "tool",
          content: event.result,
        });
        const step = this.#toolSteps.get(event.toolCallId);
        if (step !== undefined) {
          this.#toolSteps.delete(event.toolCallId);
          out.push({ type: EventType.STEP_FINISHED, stepName: step });
        }
        break;
      }
      case "ChatResumed":
        out.push({
          type: EventType.CUSTOM,
          name: "agentloop.chat_resumed",
          value: { step: event.step, fromIteration: event.fromIteration },
        });
        break;
      case "StateChanged":
        out.push(stateDelta(event));
        break;
      case "ChatCompleted":
        this.#finish(out, {
          type: EventType.RUN_FINISHED,
          threadId: this.#options.threadId,
          runId: this.#options.runId,
          result: event.result,
          outcome: { type: "success" },
          usage: [toTokenUsage(event.usage)],
        });
        break;
      case "ChatFailed":
        this.#finish(
          out,
          event.cancelled
            ? {
                type: EventType.RUN_FINISHED,
                threadId: this.#options.threadId,
                runId: this.#options.runId,
                outcome: { type: "cancelled" },
              }
            : {
                type: EventType.RUN_ERROR,
                message: event.error.message,
                ...(event.error.code === undefined ? {} : { code: event.error.code }),
              },
        );
        break;
      default:
        break;
    }
    return out;
  }

  #attempt(iteration: number): number {
    return this.#attempts.get(iteration) ?? 1;
  }

  #assistantId(iteration: number): string {
    return messageIds.assistant(this.#options.chatId, iteration, this.#attempt(iteration));
  }

  /** TOOL_CALL_START/ARGS/END for a call the client has not seen yet (agentloop has whole arguments). */
  #announce(
    out: AguiEvent[],
    call: { toolCallId: string; toolName: string; arguments: string; iteration: number },
  ): void {
    if (this.#knownToolCalls.has(call.toolCallId)) return;
    this.#knownToolCalls.add(call.toolCallId);
    this.#closeMessages(out);
    out.push({
      type: EventType.TOOL_CALL_START,
      toolCallId: call.toolCallId,
      toolCallName: call.toolName,
      parentMessageId: this.#assistantId(call.iteration),
    });
    if (call.arguments !== "") {
      out.push({ type: EventType.TOOL_CALL_ARGS, toolCallId: call.toolCallId, delta: call.arguments });
    }
    out.push({ type: EventType.TOOL_CALL_END, toolCallId: call.toolCallId });
  }

  #closeText(out: AguiEvent[]): void {
    if (this.#text === undefined) return;
    out.push({ type: EventType.TEXT_MESSAGE_END, messageId: this.#text });
    this.#text = undefined;
  }

  #closeReasoning(out: AguiEvent[]): void {
    if (this.#reasoning === undefined) return;
    out.push({ type: EventType.REASONING_MESSAGE_END, messageId: this.#reasoning });
    out.push({ type: EventType.REASONING_END, messageId: this.#reasoning });
    this.#reasoning = undefined;
  }

  #closeMessages(out: AguiEvent[]): void {
    this.#closeReasoning(out);
    this.#closeText(out);
  }

  #closeStep(out: AguiEvent[]): void {
    for (const name of this.#toolSteps.values()) out.push({ type: EventType.STEP_FINISHED, stepName: name });
    this.#toolSteps.clear();
    if (this.#iterationStep !== undefined) {
      out.push({ type: EventType.STEP_FINISHED, stepName: this.#iterationStep.name });
      this.#iterationStep = undefined;
    }
  }

  /** Closes whatever is open (the protocol wants no open message or step at the end), then `last`. */
  #finish(out: AguiEvent[], last: AguiEvent): void {
    this.#closeMessages(out);
    this.#closeStep(out);
    out.push(last);
    this.#isDone = true;
  }
}

function stateDelta(event: EventOf<"StateChanged">): AguiEvent {
  return {
    type: EventType.STATE_DELTA,
    delta: [{ op: "add", path: `/${STATE_KEY}/${pointerToken(event.machine)}`, value: event.state ?? null }],
  };
}

function approvalInterrupt(event: EventOf<"ToolApprovalRequested">, seq: number): Interrupt {
  return {
    id: formatInterruptId(seq, event.toolCallId),
    reason: "tool_approval",
    message: `${event.toolName} wants to run with ${shorten(event.arguments, 500)}: approve or deny`,
    toolCallId: event.toolCallId,
    responseSchema: { ...APPROVAL_RESPONSE_SCHEMA },
    metadata: { agentloop: { toolName: event.toolName, arguments: event.arguments } },
  };
}

function toTokenUsage(usage: EventOf<"ChatCompleted">["usage"]): TokenUsage {
  return {
    inputTokens: usage.prompt,
    outputTokens: usage.completion,
    totalTokens: usage.total,
    cachedInputTokens: usage.cached,
  };
}

/** At most `limit` characters (the whole arguments stay in the interrupt's metadata). */
function shorten(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}…`;
}

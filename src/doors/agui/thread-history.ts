import type { AssistantMessage, Message, ToolMessage } from "@ag-ui/core";
import type { AgentEvent } from "../../events/types.js";
import { messageIds } from "./agui-ids.js";

/**
 * A thread's conversation and statechart state rebuilt from its session's events, read in log
 * order: what a run sends as MESSAGES_SNAPSHOT and STATE_SNAPSHOT when it opens. Message ids are the
 * ones the run mapper streams under, so a client's messages and the snapshot agree.
 *
 * Per chat: the user's text, then per model request the assistant's final text with its tool calls
 * (a request whose stream was reset counts with its last attempt), then each call's result (a
 * denied call's result is the `{"error":"denied"}` the model saw). Reasoning is not in the
 * snapshot: a client keeps the reasoning it streamed. A session reset (`new`) empties it.
 */
export class ThreadHistory {
  readonly #messages: Message[] = [];
  readonly #assistants = new Map<string, AssistantMessage>();
  readonly #toolCalls = new Set<string>();
  readonly #attempts = new Map<string, number>();
  readonly #states: Record<string, unknown> = {};

  /** Takes the next event of the session. */
  add(event: AgentEvent): void {
    if (event.kind === "StateChanged") {
      this.#states[event.machine] = event.state ?? null;
      // `new` on the control subject: the session starts over, and so does the thread's conversation.
      if (event.machine === "session" && event.state === "resetting") this.#clear();
      return;
    }
    if (event.chatId === "") return;
    const { chatId, iteration } = event;
    switch (event.kind) {
      case "ChatStarted":
        this.#messages.push({ id: messageIds.user(chatId), role: "user", content: event.text });
        break;
      case "ModelStreamSegmentStart":
        this.#attempts.set(`${chatId}/${iteration}`, event.attempt);
        break;
      case "ModelResponse":
        if (event.purpose === "compaction") break;
        if (event.content !== "") this.#assistant(chatId, iteration).content = event.content;
        break;
      case "ToolApprovalRequested":
      case "ToolCallStarted":
      case "ToolCallInDoubt":
        this.#toolCall(chatId, iteration, event.toolCallId, event.toolName, event.arguments);
        break;
      case "ToolApprovalResolved":
        if (!event.approved) {
          this.#toolResult(
            chatId,
            event.toolCallId,
            JSON.stringify({ error: "denied", ...(event.reason ? { reason: event.reason } : {}) }),
          );
        }
        break;
      case "ToolCallCompleted":
        this.#toolResult(chatId, event.toolCallId, event.result);
        break;
      case "ToolCallFailed":
        this.#toolResult(chatId, event.toolCallId, event.result, event.error.message);
        break;
      default:
        break;
    }
  }

  #clear(): void {
    this.#messages.length = 0;
    this.#assistants.clear();
    this.#toolCalls.clear();
    this.#attempts.clear();
  }

  /** The conversation so far, in order. */
  messages(): Message[] {
    return this.#messages.map((message) => structuredClone(message));
  }

  /** The state the run opens with: `{ statechart: { <machine>: <value> } }`. */
  state(): { statechart: Record<string, unknown> } {
    return { statechart: structuredClone(this.#states) };
  }

  /** The tool calls the snapshot holds (a run does not announce them again). */
  toolCallIds(): ReadonlySet<string> {
    return this.#toolCalls;
  }

  #assistant(chatId: string, iteration: number): AssistantMessage {
    const attempt = this.#attempts.get(`${chatId}/${iteration}`) ?? 1;
    const id = messageIds.assistant(chatId, iteration, attempt);
    let message = this.#assistants.get(id);
    if (message === undefined) {
      message = { id, role: "assistant" };
      this.#assistants.set(id, message);
      this.#messages.push(message);
    }
    return message;
  }

  #toolCall(chatId: string, iteration: number, toolCallId: string, name: string, args: string): void {
    if (this.#toolCalls.has(toolCallId)) return;
    this.#toolCalls.add(toolCallId);
    const message = this.#assistant(chatId, iteration);
    message.toolCalls = [
      ...(message.toolCalls ?? []),
      { id: toolCallId, type: "function", function: { name, arguments: args } },
    ];
  }

  #toolResult(chatId: string, toolCallId: string, content: string, error?: string): void {
    const message: ToolMessage = {
      id: messageIds.tool(chatId, toolCallId),
      role: "tool",
      toolCallId,
      content,
      ...(error === undefined ? {} : { error }),
    };
    this.#messages.push(message);
  }
}

import { type Event as AguiEvent, EventType } from "@ag-ui/core";

/**
 * What was open at a point of a run (the run itself, steps, text and reasoning messages), told by
 * watching the AG-UI events up to there. A reconnected stream starts with {@link reopen}'s events:
 * without them a client that checks the order (as `@ag-ui/client` does) would refuse a stream that
 * begins in the middle of a message. They carry no ids: they repeat framing, never content.
 */
export class OpenFraming {
  #runStarted: AguiEvent | undefined;
  readonly #steps = new Set<string>();
  readonly #texts = new Map<string, AguiEvent>();
  readonly #reasoningSpans = new Set<string>();
  readonly #reasoningMessages = new Set<string>();

  observe(event: AguiEvent): void {
    switch (event.type) {
      case EventType.RUN_STARTED:
        this.#runStarted = event;
        break;
      case EventType.STEP_STARTED:
        this.#steps.add(event.stepName);
        break;
      case EventType.STEP_FINISHED:
        this.#steps.delete(event.stepName);
        break;
      case EventType.TEXT_MESSAGE_START:
        this.#texts.set(event.messageId, event);
        break;
      case EventType.TEXT_MESSAGE_END:
        this.#texts.delete(event.messageId);
        break;
      case EventType.REASONING_START:
        this.#reasoningSpans.add(event.messageId);
        break;
      case EventType.REASONING_END:
        this.#reasoningSpans.delete(event.messageId);
        break;
      case EventType.REASONING_MESSAGE_START:
        this.#reasoningMessages.add(event.messageId);
        break;
      case EventType.REASONING_MESSAGE_END:
        this.#reasoningMessages.delete(event.messageId);
        break;
      default:
        break;
    }
  }

  /** The events that open again what is open now, before `next` (the first event sent). */
  reopen(next: AguiEvent): AguiEvent[] {
    if (next.type === EventType.RUN_STARTED || this.#runStarted === undefined) return [];
    return [
      this.#runStarted,
      ...[...this.#steps].map((stepName): AguiEvent => ({ type: EventType.STEP_STARTED, stepName })),
      ...this.#texts.values(),
      ...[...this.#reasoningSpans].map((messageId): AguiEvent => ({ type: EventType.REASONING_START, messageId })),
      ...[...this.#reasoningMessages].map(
        (messageId): AguiEvent => ({ type: EventType.REASONING_MESSAGE_START, messageId, role: "reasoning" }),
      ),
    ];
  }
}

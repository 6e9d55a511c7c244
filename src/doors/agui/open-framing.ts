import { type Event as AguiEvent, EventType } from "@ag-ui/core";

/**
 * What was open at a point of a run (the run itself, steps, text and reasoning messages), told by
 * watching the AG-UI events up to there. A reconnected stream starts with {@link reopen}'s events:
 * without them a client that checks the order (as `@ag-ui/client` does) would refuse a stream that
 * begins in the middle of a message. They carry no ids: they repeat framing, never content.
 */
export class OpenFraming {
  #runStarted: AguiEvent | undefined;
  #state: unknown;
  readonly #steps = new Set<string>();
  readonly #texts = new Map<string, AguiEvent>();
  readonly #reasoningSpans = new Set<string>();
  readonly #reasoningMessages = new Set<string>();

  observe(event: AguiEvent): void {
    switch (event.type) {
      case EventType.RUN_STARTED:
        this.#runStarted = event;
        break;
      case EventType.STATE_SNAPSHOT:
        this.#state = structuredClone(event.snapshot);
        break;
      case EventType.STATE_DELTA:
        this.#state = applyAdds(this.#state, event.delta);
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
      // A client that comes back without its state (a reload) gets it as it was at the last id.
      ...(this.#state === undefined
        ? []
        : [{ type: EventType.STATE_SNAPSHOT, snapshot: this.#state } as AguiEvent]),
      ...[...this.#steps].map((stepName): AguiEvent => ({ type: EventType.STEP_STARTED, stepName })),
      ...this.#texts.values(),
      ...[...this.#reasoningSpans].map(
        (messageId): AguiEvent => ({ type: EventType.REASONING_START, messageId }),
      ),
      ...[...this.#reasoningMessages].map(
        (messageId): AguiEvent => ({ type: EventType.REASONING_MESSAGE_START, messageId, role: "reasoning" }),
      ),
    ];
  }
}

/** The `add` operations of a patch applied to a copy of `state` (the run mapper makes no other kind). */
function applyAdds(
  state: unknown,
  patch: ReadonlyArray<{ op: string; path: string; value?: unknown }>,
): unknown {
  const next = structuredClone(state ?? {}) as Record<string, unknown>;
  for (const operation of patch) {
    if (operation.op !== "add") continue;
    const tokens = operation.path
      .split("/")
      .slice(1)
      .map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"));
    let target = next;
    for (const token of tokens.slice(0, -1)) {
      const child = target[token];
      if (typeof child !== "object" || child === null) target[token] = {};
      target = target[token] as Record<string, unknown>;
    }
    const leaf = tokens.at(-1);
    if (leaf !== undefined) target[leaf] = structuredClone(operation.value);
  }
  return next;
}

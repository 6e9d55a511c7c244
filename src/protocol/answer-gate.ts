import type { EventBody } from "../events/types.js";

/**
 * Decides which of a chat's text may go to a protocol caller, and when. A caller cannot take text
 * back, so nothing is released while it could still be retracted:
 *
 * - a model request's text is held until that request's stream completed (`ModelResponse`): a
 *   stream reset (a retry) discards the attempt's text, so a retried answer is sent once, after
 *   the retry succeeded;
 * - only the text of a request that called no tool is released: the chat's result is the last
 *   such answer, so the joined `response` chunks equal the chat's result. Narration before tool
 *   calls is not streamed (keep-alive `ack`s show the chat is alive while tools run).
 *
 * Pure: fed the chat's events, it returns the text they release.
 */
export class AnswerGate {
  #released = "";

  /** All text released so far. */
  get released(): string {
    return this.#released;
  }

  /** The text `event` releases ("" for none). */
  push(event: EventBody): string {
    if (event.kind !== "ModelResponse" || event.purpose === "compaction" || event.toolCalls > 0) return "";
    if (event.content.trim() === "") return "";
    this.#released += event.content;
    return event.content;
  }

  /**
   * What still has to be sent once the chat's result is known: the result's rest when what was
   * released is its beginning (normally all of it, or "" when released already), else "" (the
   * released text already told the answer; nothing can be taken back).
   */
  remainder(result: string): string {
    return result.startsWith(this.#released) ? result.slice(this.#released.length) : "";
  }
}

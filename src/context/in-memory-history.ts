import type { Message } from "../llm/types.js";
import { wellFormedMessage } from "../llm/well-formed-message.js";
import type { ContextHistory } from "./context-history.js";
import type { PendingApproval } from "./pending-approval.js";

/**
 * A {@link ContextHistory} in process memory, for tests and history-less agents that still want
 * the persistence semantics: messages are copied in and out (no aliasing with the live context)
 * and system messages are never stored.
 *
 * @example
 * ```ts
 * import { createAgent, InMemoryContextHistory } from "agentloop";
 * import { scriptedModel } from "agentloop/testing";
 *
 * const history = new InMemoryContextHistory([{ role: "user", content: "My name is Ada." }]);
 * const agent = await createAgent({ llm: scriptedModel([{ text: "Hello, Ada." }]), model: "any", history });
 * await agent.chat("Who am I?"); // the model sees the earlier message first
 * ```
 */
export class InMemoryContextHistory implements ContextHistory {
  #messages: Message[];
  #seq = 0;
  #pendingApproval: PendingApproval | undefined;

  constructor(messages: readonly Message[] = []) {
    this.#messages = storable(messages);
  }

  async restore(): Promise<Message[]> {
    return structuredClone(this.#messages);
  }

  async append(messages: readonly Message[]): Promise<void> {
    this.#messages.push(...storable(messages));
  }

  async replace(messages: readonly Message[]): Promise<void> {
    this.#messages = storable(messages);
  }

  async clear(): Promise<void> {
    this.#messages = [];
    this.#pendingApproval = undefined;
  }

  async loadSeq(): Promise<number> {
    return this.#seq;
  }

  async saveSeq(seq: number): Promise<void> {
    this.#seq = Math.max(this.#seq, seq);
  }

  async loadPendingApproval(): Promise<PendingApproval | undefined> {
    return structuredClone(this.#pendingApproval);
  }

  async savePendingApproval(pending: PendingApproval): Promise<void> {
    this.#pendingApproval = structuredClone(pending);
  }

  async takePendingApproval(): Promise<boolean> {
    const had = this.#pendingApproval !== undefined;
    this.#pendingApproval = undefined;
    return had;
  }
}

/** Copies of the messages, system messages left out, lone surrogates replaced (see {@link wellFormedMessage}). */
function storable(messages: readonly Message[]): Message[] {
  return structuredClone(messages.filter((message) => message.role !== "system").map(wellFormedMessage));
}

import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import type { Task } from "@modelcontextprotocol/sdk/types.js";

/**
 * The SDK's in-memory task store, told when a client cancels a task (`tasks/cancel` only marks it
 * in the store): the chat behind the task is stopped on its host from {@link onCancelled}.
 */
export class AgentTaskStore extends InMemoryTaskStore {
  readonly #onCancelled = new Map<string, () => void>();

  /** Calls `stop` once when `taskId` is cancelled; returns the function that forgets it. */
  onCancelled(taskId: string, stop: () => void): () => void {
    this.#onCancelled.set(taskId, stop);
    return () => this.#onCancelled.delete(taskId);
  }

  override async updateTaskStatus(
    taskId: string,
    status: Task["status"],
    statusMessage?: string,
    sessionId?: string,
  ): Promise<void> {
    await super.updateTaskStatus(taskId, status, statusMessage, sessionId);
    if (status !== "cancelled") return;
    const stop = this.#onCancelled.get(taskId);
    this.#onCancelled.delete(taskId);
    stop?.();
  }
}

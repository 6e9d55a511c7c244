import { randomUUID } from "node:crypto";
import { describeError } from "../errors/describe-error.js";
import { sliceCodePoints } from "../text/truncate-text.js";
import { BackgroundTaskCancelledError, ToolError } from "./tool-errors.js";
import type { ToolContext } from "./tool-set.js";

/** The mailbox message type of task results: stackable, so a burst of them coalesces into one chat. */
export const TASK_RESULT_TYPE = "task_result";

/** Longest `task_result` message, wrapper included, so one task cannot flood the context. */
export const TASK_RESULT_MAX_CHARS = 2_000;

export type TaskStatus = "completed" | "failed" | "cancelled";

export interface TaskResult {
  id: string;
  status: TaskStatus;
  /** The work's output, or the error message of a failed task. */
  output: string;
  /** What the task was (e.g. the command), shown to the model. */
  label?: string;
}

/** Work run in the background; `signal` aborts when the ToolSet is reset or the task cancelled. */
export type BackgroundWork = (signal: AbortSignal) => Promise<string>;

export interface BackgroundTasksOptions {
  /** Task ids; default `task-` + 8 random hex characters. */
  createId?: () => string;
  /** Told when posting a result fails (it never throws into the work). Default: nothing. */
  onPostError?: (error: unknown, result: TaskResult) => void;
}

interface RunningTask {
  controller: AbortController;
  label: string | undefined;
}

/**
 * Background work for a ToolSet: a tool starts long work, returns a task id at once,
 * and when the work ends a `task_result` message is posted to the session's mailbox through
 * `ToolContext.post`, as a stackable message, so the model learns of it on its next turn.
 *
 * One instance per session (create it in the set's `copy()`); `cancelAll()` belongs in `reset()`:
 * results of work cancelled that way are not posted (the conversation they belonged to is gone).
 */
export class BackgroundTasks {
  readonly #running = new Map<string, RunningTask>();
  readonly #createId: () => string;
  readonly #onPostError: (error: unknown, result: TaskResult) => void;

  constructor(options: BackgroundTasksOptions = {}) {
    this.#createId = options.createId ?? (() => `task-${randomUUID().slice(0, 8)}`);
    this.#onPostError = options.onPostError ?? (() => {});
  }

  /** Ids of the tasks still running. */
  get running(): string[] {
    return [...this.#running.keys()];
  }

  /**
   * Starts `work` and returns its task id at once.
   * @throws ToolError when the chat runs without a session host (no `post`): nobody would hear the result.
   */
  start(context: ToolContext, work: BackgroundWork, options: { label?: string } = {}): string {
    const { post } = context;
    if (post === undefined) {
      throw new ToolError(
        "background tasks need a session host to report back: run the work in the foreground",
      );
    }
    const id = this.#createId();
    const controller = new AbortController();
    this.#running.set(id, { controller, label: options.label });
    void (async () => {
      let result: TaskResult;
      try {
        const output = await work(controller.signal);
        result = { id, status: controller.signal.aborted ? "cancelled" : "completed", output };
      } catch (error) {
        const status = controller.signal.aborted ? "cancelled" : "failed";
        result = { id, status, output: describeError(error) };
      }
      const wasRunning = this.#running.delete(id);
      // Cancelled by reset(): the session that asked has been cleared, so stay silent.
      if (!wasRunning) return;
      if (options.label !== undefined) result.label = options.label;
      try {
        post(formatTaskResult(result), { type: TASK_RESULT_TYPE, stackable: true });
      } catch (error) {
        this.#onPostError(error, result);
      }
    })();
    return id;
  }

  /** Cancels one task; its result is still posted (status `cancelled`). False when it is not running. */
  cancel(id: string): boolean {
    const task = this.#running.get(id);
    if (task === undefined) return false;
    task.controller.abort(new BackgroundTaskCancelledError(id, "cancelled"));
    return true;
  }

  /** Cancels every task without posting their results (for a ToolSet's `reset()`). */
  cancelAll(): void {
    const tasks = [...this.#running];
    this.#running.clear();
    for (const [id, task] of tasks) task.controller.abort(new BackgroundTaskCancelledError(id, "reset"));
  }
}

/**
 * `<task_result id=".." status="..">output</task_result>`, XML-escaped, at most
 * {@link TASK_RESULT_MAX_CHARS} characters in all: a long output is cut with a visible marker.
 */
export function formatTaskResult(result: TaskResult, maxChars = TASK_RESULT_MAX_CHARS): string {
  const label = result.label === undefined ? "" : ` label="${escapeXml(sliceCodePoints(result.label, 200))}"`;
  const open = `<task_result id="${escapeXml(result.id)}" status="${result.status}"${label}>`;
  const close = "</task_result>";
  const body = escapeXml(result.output);
  const budget = maxChars - open.length - close.length;
  if (body.length <= budget) return open + body + close;
  const marker = `… [truncated ${result.output.length} characters of output]`;
  let cut = Math.max(0, budget - marker.length);
  // Never cut an entity (`&amp;`) in half: back up to its `&`.
  const ampersand = body.lastIndexOf("&", cut);
  if (ampersand !== -1 && ampersand > cut - 6 && body.indexOf(";", ampersand) >= cut) cut = ampersand;
  return open + sliceCodePoints(body, cut) + marker + close;
}

const XML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => XML_ESCAPES[character] ?? character);
}

import { randomUUID } from "node:crypto";
import {
  type AgentCard,
  type CancelTaskRequest,
  type GetTaskRequest,
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
  TaskState,
} from "@a2a-js/sdk";
import {
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import type { A2ARequestHandler } from "@a2a-js/sdk/server";
import type { Bus } from "../../bus/bus.js";
import { NoRespondersError } from "../../bus/bus-errors.js";
import { parseChatReply } from "../../bus/contract.js";
import { HostSilentError, requestWithHeartbeat } from "../../bus/request-with-heartbeat.js";
import { chatSubject, controlSubject, isValidName, sessionHeartbeatSubject } from "../../bus/subjects.js";
import { describeError } from "../../errors/describe-error.js";
import { sleep } from "../../timers/sleep.js";
import type { TaskLog } from "./task-log.js";
import { advanceProgress, isFinalPhase, type TaskProgress, type TaskRecord } from "./task-progress.js";
import { artifactUpdates, statusUpdate, toA2aTask } from "./to-a2a-task.js";

/** How long a chat request may wait for its reply (the door only reads it to see a refusal). */
const CHAT_REQUEST_TIMEOUT_MS = 24 * 60 * 60 * 1000;
const CONTROL_TIMEOUT_MS = 10_000;
const DEFAULT_PAGE_SIZE = 50;
/** Tries of a chat request whose host died on it (about a minute in all: a lease expires meanwhile). */
const MAX_DELIVERY_ATTEMPTS = 12;

export interface A2aAgentHandlerOptions {
  agent: string;
  bus: Bus;
  prefix: string;
  log: TaskLog;
  card: () => AgentCard;
  /** Aborted when the door closes or the HTTP client goes: the request's streams and waits end. */
  closed: AbortSignal;
  /** Aborted when the door closes: ends what outlives a request (a chat request's delivery). */
  doorClosed: AbortSignal;
}

/**
 * One agent's A2A operations over the bus contract: a task is one chat (its id the chat request's
 * `id`), its context the session; its state comes from the event log, so any door answers for it.
 */
export class A2aAgentHandler implements A2ARequestHandler {
  readonly #options: A2aAgentHandlerOptions;

  constructor(options: A2aAgentHandlerOptions) {
    this.#options = options;
  }

  async getAgentCard(): Promise<AgentCard> {
    return this.#options.card();
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw new UnsupportedOperationError("this agent has no extended agent card");
  }

  async sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    const signal = this.#options.closed;
    const started = await this.#start(params);
    if (params.configuration?.returnImmediately === true) {
      return toA2aTask(started.record, started.progress, historyOf(params));
    }
    let { progress } = started;
    for await (const item of this.#updates(started.record, started.progress, started.nextSeq, signal)) {
      if (item.payload?.$case === "statusUpdate") progress = item.progress;
    }
    return toA2aTask(started.record, progress, historyOf(params));
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const started = await this.#start(params);
    yield { payload: { $case: "task", value: toA2aTask(started.record, started.progress) } };
    for await (const item of this.#updates(
      started.record,
      started.progress,
      started.nextSeq,
      this.#options.closed,
    )) {
      yield { payload: item.payload } as StreamResponse;
    }
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const record = await this.#record(params.id);
    const { progress, nextSeq } = await this.#options.log.snapshot(record, this.#options.closed);
    if (isFinalPhase(progress.phase)) {
      throw new UnsupportedOperationError(
        `task ${record.id} is ${progress.phase}: there is nothing to subscribe to`,
      );
    }
    yield { payload: { $case: "task", value: toA2aTask(record, progress) } };
    for await (const item of this.#updates(record, progress, nextSeq, this.#options.closed)) {
      yield { payload: item.payload } as StreamResponse;
    }
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    const record = await this.#record(params.id);
    const { progress } = await this.#options.log.snapshot(record, this.#options.closed);
    return toA2aTask(record, progress, { historyLength: params.historyLength });
  }

  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const pageSize = params.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) {
      throw new RequestMalformedError("pageSize must be a whole number from 1 to 100");
    }
    const offset = params.pageToken === "" ? 0 : Number(params.pageToken);
    if (!Number.isInteger(offset) || offset < 0)
      throw new RequestMalformedError("pageToken is not one this server gave");
    const after =
      params.statusTimestampAfter === undefined ? undefined : Date.parse(params.statusTimestampAfter);
    let records = (await this.#options.log.list(this.#options.agent))
      .filter((record) => params.contextId === "" || record.contextId === params.contextId)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id));
    const view = { historyLength: params.historyLength, includeArtifacts: params.includeArtifacts === true };
    const needsState = params.status !== TaskState.TASK_STATE_UNSPECIFIED || after !== undefined;
    let tasks: Task[];
    if (needsState) {
      // A filter on the state or its time: every candidate's state is read, then the page cut.
      const all = await Promise.all(records.map((record) => this.#task(record, view)));
      tasks = all.filter(
        (task) =>
          (params.status === 0 || task.status?.state === params.status) &&
          (after === undefined || Date.parse(task.status?.timestamp ?? "") > after),
      );
      records = [];
      const page = tasks.slice(offset, offset + pageSize);
      return {
        tasks: page,
        nextPageToken: offset + pageSize < tasks.length ? String(offset + pageSize) : "",
        pageSize: page.length,
        totalSize: tasks.length,
      };
    }
    tasks = await Promise.all(
      records.slice(offset, offset + pageSize).map((record) => this.#task(record, view)),
    );
    return {
      tasks,
      nextPageToken: offset + pageSize < records.length ? String(offset + pageSize) : "",
      pageSize: tasks.length,
      totalSize: records.length,
    };
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    const record = await this.#record(params.id);
    const snapshot = await this.#options.log.snapshot(record, this.#options.closed);
    if (isFinalPhase(snapshot.progress.phase)) {
      throw new TaskNotCancelableError(`task ${record.id} is already ${snapshot.progress.phase}`);
    }
    // This task's chat alone (the request's id is the task's): taken out of the session's queue
    // if it waits there behind another chat, stopped if it runs; the session's other chats go on.
    await this.#control({ session: record.contextId, command: "cancel", id: record.id });
    let { progress } = snapshot;
    for await (const item of this.#updates(
      record,
      progress,
      snapshot.nextSeq,
      AbortSignal.any([this.#options.closed, AbortSignal.timeout(CONTROL_TIMEOUT_MS)]),
    )) {
      progress = item.progress;
    }
    return toA2aTask(record, progress);
  }

  async createTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    throw new PushNotificationNotSupportedError("push notifications are not supported: use SubscribeToTask");
  }
  async getTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    throw new PushNotificationNotSupportedError("push notifications are not supported: use SubscribeToTask");
  }
  async listTaskPushNotificationConfigs(): Promise<never> {
    throw new PushNotificationNotSupportedError("push notifications are not supported: use SubscribeToTask");
  }
  async deleteTaskPushNotificationConfig(): Promise<void> {
    throw new PushNotificationNotSupportedError("push notifications are not supported: use SubscribeToTask");
  }

  async #task(record: TaskRecord, view: Parameters<typeof toA2aTask>[2]): Promise<Task> {
    const { progress } = await this.#options.log.snapshot(record, this.#options.closed);
    return toA2aTask(record, progress, view);
  }

  async #record(taskId: string): Promise<TaskRecord> {
    if (taskId.trim() === "") throw new RequestMalformedError("the task id is missing");
    const record = await this.#options.log.get(this.#options.agent, taskId);
    if (record === undefined)
      throw new TaskNotFoundError(`no task ${taskId} of agent ${this.#options.agent}`);
    return record;
  }

  /**
   * A new message: a new task (a chat in the context's session, new when none is named), or, on a
   * task waiting for input, the answer to its approval.
   */
  async #start(
    params: SendMessageRequest,
  ): Promise<{ record: TaskRecord; progress: TaskProgress; nextSeq: number }> {
    const message = params.message;
    if (message === undefined) throw new RequestMalformedError("message is required");
    if (message.messageId === "") throw new RequestMalformedError("message.messageId is required");
    if (message.taskId !== "") return this.#answer(message);
    const text = message.parts
      .flatMap((part) => (part.content?.$case === "text" ? [part.content.value] : []))
      .join("\n");
    if (text.trim() === "")
      throw new RequestMalformedError("the message needs a text part that is not blank");
    const contextId = message.contextId === "" ? randomUUID() : message.contextId;
    if (!isValidName(contextId)) {
      throw new RequestMalformedError(
        "contextId must match [A-Za-z0-9_-]{1,64}: it names the agent's session",
      );
    }
    const { agent, log } = this.#options;
    const record: TaskRecord = {
      id: randomUUID(),
      agent,
      contextId,
      text,
      messageId: message.messageId,
      createdAt: new Date().toISOString(),
      fromSeq: await log.nextEventSeq(),
    };
    await log.put(record);
    void this.#deliver(record);
    return { record, progress: { phase: "submitted", timestamp: record.createdAt }, nextSeq: record.fromSeq };
  }

  /**
   * Sends the task's chat request and reads its reply, only for a refusal (no chat will run: the
   * refusal goes into the record); the task's progress is in the events. A host that dies on it
   * (its heartbeat stops) is asked again with the same `id`: the session's next owner resumes the
   * journaled chat and answers, or says it was cancelled, and nothing runs twice.
   */
  async #deliver(record: TaskRecord): Promise<void> {
    const { bus, prefix, agent, log, doorClosed } = this.#options;
    const payload = JSON.stringify({ session: record.contextId, text: record.text, id: record.id });
    const refuse = async (failure: { code: string; message: string }): Promise<void> => {
      const { progress } = await log.snapshot(record);
      if (progress.chatId === undefined) await log.put({ ...record, failure });
    };
    for (let attempt = 1; !doorClosed.aborted; attempt++) {
      try {
        const reply = await requestWithHeartbeat(bus, chatSubject(prefix, agent), payload, {
          heartbeatSubject: sessionHeartbeatSubject(prefix, agent, record.contextId),
          timeoutMs: CHAT_REQUEST_TIMEOUT_MS,
          signal: doorClosed,
        });
        const parsed = parseChatReply(reply.data);
        if (!parsed.ok) return await refuse({ code: "bad_reply", message: parsed.error.message });
        if (!parsed.value.ok) await refuse(parsed.value.error);
        return;
      } catch (error) {
        if (doorClosed.aborted) return;
        const isHostGone = error instanceof HostSilentError || error instanceof NoRespondersError;
        if (!isHostGone || attempt >= MAX_DELIVERY_ATTEMPTS) {
          await refuse({ code: "unavailable", message: describeError(error) }).catch(() => {});
          return;
        }
        // The door closing ends the wait early; the loop then sees it closed.
        await sleep(Math.min(attempt, 5) * 1_000, doorClosed).catch(() => {});
      }
    }
  }

  /** A message on an existing task: the approval of its held tool call. */
  async #answer(message: Message): Promise<{ record: TaskRecord; progress: TaskProgress; nextSeq: number }> {
    const record = await this.#record(message.taskId);
    if (message.contextId !== "" && message.contextId !== record.contextId) {
      throw new RequestMalformedError(`task ${record.id} belongs to context ${record.contextId}`);
    }
    const { progress, nextSeq } = await this.#options.log.snapshot(record, this.#options.closed);
    if (progress.phase !== "input-required" || progress.approval === undefined) {
      throw new UnsupportedOperationError(
        isFinalPhase(progress.phase)
          ? `task ${record.id} is ${progress.phase}: send a new message in context ${record.contextId} (without taskId)`
          : `task ${record.id} is ${progress.phase} and waits for no input`,
      );
    }
    const answer = approvalAnswer(message);
    if (answer.toolCallId !== progress.approval.toolCallId) {
      throw new RequestMalformedError(
        `task ${record.id} waits for the approval of tool call ${progress.approval.toolCallId}, not ${answer.toolCallId}`,
      );
    }
    await this.#control({
      session: record.contextId,
      command: answer.approved ? "approve" : "deny",
      toolCallId: answer.toolCallId,
      // Bound to what the approver saw: the call runs only with these arguments.
      arguments: answer.arguments ?? progress.approval.arguments,
      ...(answer.reason === undefined ? {} : { reason: answer.reason }),
    });
    return { record, progress, nextSeq };
  }

  async #control(payload: Record<string, unknown>): Promise<void> {
    const { bus, prefix, agent } = this.#options;
    let reply: { ok: boolean; error?: { code: string; message: string } };
    try {
      const message = await bus.request(controlSubject(prefix, agent), JSON.stringify(payload), {
        timeoutMs: CONTROL_TIMEOUT_MS,
        signal: this.#options.closed,
      });
      reply = JSON.parse(message.data) as typeof reply;
    } catch (error) {
      throw new UnsupportedOperationError(
        `the agent did not take the ${String(payload.command)}: ${describeError(error)}`,
      );
    }
    if (!reply.ok) {
      const reason = reply.error === undefined ? "refused" : `${reply.error.code}: ${reply.error.message}`;
      throw new RequestMalformedError(`the agent refused the ${String(payload.command)}: ${reason}`);
    }
  }

  /**
   * The task's stream items from `fromSeq` on, each with the progress after it, until the task
   * ends or waits for input (or `signal` aborts).
   */
  async *#updates(
    record: TaskRecord,
    start: TaskProgress,
    fromSeq: number,
    signal: AbortSignal,
  ): AsyncGenerator<StreamResponse & { progress: TaskProgress }> {
    let progress = start;
    if (isFinalPhase(progress.phase)) {
      yield { ...statusUpdate(record, progress), progress };
      return;
    }
    const stop = new AbortController();
    const both = AbortSignal.any([signal, stop.signal]);
    // A refused request leaves no events: its failure lands in the record, checked while waiting.
    const watchRefusal = setInterval(() => {
      void this.#options.log.get(record.agent, record.id).then((latest) => {
        if (latest?.failure !== undefined && progress.chatId === undefined) stop.abort();
      });
    }, 500);
    try {
      for await (const { event } of this.#options.log.follow(record, fromSeq, both)) {
        const next = advanceProgress(progress, record.id, event);
        if (next.chatId !== undefined && event.chatId === next.chatId) {
          for (const item of artifactUpdates(record, event)) yield { ...item, progress };
        }
        if (next !== progress && (next.phase !== progress.phase || next.approval !== progress.approval)) {
          progress = next;
          yield { ...statusUpdate(record, progress), progress };
          if (isFinalPhase(progress.phase) || progress.phase === "input-required") return;
        }
        progress = next;
      }
    } catch (error) {
      if (!both.aborted) throw error;
    } finally {
      clearInterval(watchRefusal);
    }
    if (stop.signal.aborted && !signal.aborted) {
      const latest = await this.#options.log.get(record.agent, record.id);
      if (latest !== undefined) {
        progress = advanceRefused(latest, progress);
        yield { ...statusUpdate(latest, progress), progress };
      }
    }
  }
}

function advanceRefused(record: TaskRecord, progress: TaskProgress): TaskProgress {
  if (record.failure === undefined) return progress;
  return {
    phase: record.failure.code === "cancelled" ? "canceled" : "failed",
    timestamp: new Date().toISOString(),
    error: `${record.failure.code}: ${record.failure.message}`,
  };
}

function historyOf(params: SendMessageRequest): { historyLength?: number | undefined } {
  return { historyLength: params.configuration?.historyLength };
}

/** The approval answer a client sends on a task waiting for input. */
export interface ApprovalAnswer {
  toolCallId: string;
  approved: boolean;
  reason?: string;
  /** The arguments the approver saw; default: those of the held call as the task showed them. */
  arguments?: string;
}

/**
 * Reads `{ "approval": { "toolCallId", "approved", "reason"?, "arguments"? } }` from the message's
 * data part.
 */
export function approvalAnswer(message: Message): ApprovalAnswer {
  for (const part of message.parts) {
    if (part.content?.$case !== "data") continue;
    const approval = (part.content.value as { approval?: unknown } | undefined)?.approval;
    if (typeof approval !== "object" || approval === null) continue;
    const { toolCallId, approved, reason, arguments: args } = approval as Record<string, unknown>;
    if (typeof toolCallId !== "string" || toolCallId === "" || typeof approved !== "boolean") break;
    if (reason !== undefined && typeof reason !== "string") break;
    if (args !== undefined && typeof args !== "string") break;
    return {
      toolCallId,
      approved,
      ...(reason === undefined ? {} : { reason }),
      ...(args === undefined ? {} : { arguments: args }),
    };
  }
  throw new RequestMalformedError(
    'a message on a task waiting for input must hold a data part { "approval": { "toolCallId": string, "approved": boolean, "reason"?: string, "arguments"?: string } }',
  );
}

import {
  type Artifact,
  type Message,
  type Part,
  Role,
  type StreamResponse,
  type Task,
  TaskState,
  type TaskStatus,
} from "@a2a-js/sdk";
import type { AgentEvent } from "../../events/types.js";
import type { TaskProgress, TaskRecord } from "./task-progress.js";

/**
 * Pure converters from agentloop's task progress and events to A2A's data model (the SDK's types).
 * Kept apart from the I/O so the mapping reads in one place.
 */

const STATES: Record<TaskProgress["phase"], TaskState> = {
  submitted: TaskState.TASK_STATE_SUBMITTED,
  working: TaskState.TASK_STATE_WORKING,
  "input-required": TaskState.TASK_STATE_INPUT_REQUIRED,
  completed: TaskState.TASK_STATE_COMPLETED,
  failed: TaskState.TASK_STATE_FAILED,
  canceled: TaskState.TASK_STATE_CANCELED,
};

/** The A2A state of a phase. */
export function taskStateOf(phase: TaskProgress["phase"]): TaskState {
  return STATES[phase];
}

export function textPart(text: string): Part {
  return {
    content: { $case: "text", value: text },
    metadata: undefined,
    filename: "",
    mediaType: "text/plain",
  };
}

export function dataPart(value: Record<string, unknown>): Part {
  return {
    content: { $case: "data", value },
    metadata: undefined,
    filename: "",
    mediaType: "application/json",
  };
}

function agentMessage(record: TaskRecord, id: string, parts: Part[]): Message {
  return {
    messageId: id,
    contextId: record.contextId,
    taskId: record.id,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The user's message that started the task. */
export function userMessage(record: TaskRecord): Message {
  return {
    messageId: record.messageId,
    contextId: record.contextId,
    taskId: record.id,
    role: Role.ROLE_USER,
    parts: [textPart(record.text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/**
 * The status message of a phase: the answer, the error, or the approval the client must give
 * (a text line and a data part `{ approval: { toolCallId, toolName, arguments } }`).
 */
function statusMessage(record: TaskRecord, progress: TaskProgress): Message | undefined {
  const { phase } = progress;
  if (phase === "completed")
    return agentMessage(record, `${record.id}-answer`, [textPart(progress.result ?? "")]);
  if ((phase === "failed" || phase === "canceled") && progress.error !== undefined) {
    return agentMessage(record, `${record.id}-error`, [textPart(progress.error)]);
  }
  if (phase === "input-required" && progress.approval !== undefined) {
    const { approval } = progress;
    return agentMessage(record, `${record.id}-approval-${approval.toolCallId}`, [
      textPart(
        `The tool ${approval.toolName} waits for approval with arguments ${approval.arguments}. ` +
          'Answer with a message on this task holding the data part { "approval": { "toolCallId", "approved": true | false, "reason"? } }.',
      ),
      dataPart({ approval: { ...approval } }),
    ]);
  }
  return undefined;
}

export function taskStatus(record: TaskRecord, progress: TaskProgress): TaskStatus {
  return {
    state: taskStateOf(progress.phase),
    message: statusMessage(record, progress),
    timestamp: progress.timestamp,
  };
}

/** The answer of a completed task, as its one artifact. */
function resultArtifact(record: TaskRecord, result: string): Artifact {
  return {
    artifactId: `${record.id}-result`,
    name: "result",
    description: "The agent's answer",
    parts: [textPart(result)],
    metadata: undefined,
    extensions: [],
  };
}

export interface TaskViewOptions {
  /** At most this many history messages (the newest); undefined: all. */
  historyLength?: number | undefined;
  includeArtifacts?: boolean;
}

/** The task as A2A shows it: status, the answer as an artifact, the user message and the answer as history. */
export function toA2aTask(record: TaskRecord, progress: TaskProgress, options: TaskViewOptions = {}): Task {
  const history = [userMessage(record)];
  const status = taskStatus(record, progress);
  if (progress.phase === "completed" && status.message !== undefined) history.push(status.message);
  const limit = options.historyLength;
  return {
    id: record.id,
    contextId: record.contextId,
    status,
    artifacts:
      options.includeArtifacts === false || progress.result === undefined
        ? []
        : [resultArtifact(record, progress.result)],
    history: limit === undefined ? history : limit === 0 ? [] : history.slice(-limit),
    metadata: { agent: record.agent, ...(progress.chatId === undefined ? {} : { chatId: progress.chatId }) },
  };
}

/** A status-update stream item; `final` states end the stream. */
export function statusUpdate(record: TaskRecord, progress: TaskProgress): StreamResponse {
  return {
    payload: {
      $case: "statusUpdate",
      value: {
        taskId: record.id,
        contextId: record.contextId,
        status: taskStatus(record, progress),
        metadata: undefined,
      },
    },
  };
}

/**
 * The artifact updates an event of the task's chat makes: the model's text streams into one
 * artifact per iteration (`<task>-iteration-<n>`, appended chunk by chunk); a segment the model
 * retried starts that artifact over (an update with `append: false`), the visible correction; the
 * final answer is the `result` artifact, sent whole when the chat completes.
 */
export function artifactUpdates(record: TaskRecord, event: AgentEvent): StreamResponse[] {
  const update = (artifact: Artifact, append: boolean, lastChunk: boolean): StreamResponse => ({
    payload: {
      $case: "artifactUpdate",
      value: {
        taskId: record.id,
        contextId: record.contextId,
        artifact,
        append,
        lastChunk,
        metadata: undefined,
      },
    },
  });
  const iterationArtifact = (text: string): Artifact => ({
    artifactId: `${record.id}-iteration-${event.iteration}`,
    name: `iteration ${event.iteration}`,
    description: "The model's text as it streams",
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
  });
  switch (event.kind) {
    case "ModelTextDelta":
      return [update(iterationArtifact(event.delta), true, false)];
    case "ModelStreamSegmentReset":
      return [update(iterationArtifact(""), false, false)];
    case "ChatCompleted":
      return [update(resultArtifact(record, event.result), false, true)];
    default:
      return [];
  }
}

import { contentToText, type ResumeEntry, type RunAgentInput } from "@ag-ui/core";
import { RunAgentInputSchema } from "@ag-ui/core/schemas";
import { NAME_PATTERN } from "../../bus/subjects.js";

/** What a run asks, read from its `RunAgentInput`. */
export type AguiRunRequest = {
  threadId: string;
  runId: string;
} & ({ kind: "chat"; text: string } | { kind: "resume"; resume: ResumeDecision[] });

/** One answered interrupt: the approval it names and the decision. */
export interface ResumeDecision {
  interruptId: string;
  approved: boolean;
  reason?: string;
}

/**
 * Reads a `RunAgentInput` (checked by the protocol's own schema): the thread is the session (its
 * name rules apply), the text is the last message, which must be the user's; with `resume` the run
 * answers approvals instead and sends no text. `state`, `tools`, `context` and `forwardedProps` are
 * not used: an agentloop agent's tools and state are the host's (documented in the README).
 */
export function parseRunInput(
  body: unknown,
): { ok: true; value: AguiRunRequest } | { ok: false; message: string } {
  const parsed = RunAgentInputSchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.map(String).join(".") ?? "";
    return {
      ok: false,
      message: `RunAgentInput${field === "" ? "" : `.${field}`}: ${issue?.message ?? "invalid"}`,
    };
  }
  const input = parsed.data as RunAgentInput;
  if (!NAME_PATTERN.test(input.threadId)) {
    return {
      ok: false,
      message: `threadId must be a session name: ${NAME_PATTERN.source} (letters, digits, _ and -)`,
    };
  }
  const { threadId, runId } = input;
  if (input.resume !== undefined && input.resume.length > 0) {
    const decisions: ResumeDecision[] = [];
    for (const entry of input.resume) {
      const decision = readDecision(entry);
      if (typeof decision === "string") return { ok: false, message: decision };
      decisions.push(decision);
    }
    return { ok: true, value: { threadId, runId, kind: "resume", resume: decisions } };
  }
  const last = input.messages.at(-1);
  if (last === undefined || last.role !== "user") {
    return { ok: false, message: "the last message must be the user's: its text is what the agent is sent" };
  }
  const text = contentToText(last.content);
  if (text.trim() === "") return { ok: false, message: "the user's message has no text" };
  if (!text.isWellFormed()) {
    return { ok: false, message: "the user's message holds a lone UTF-16 surrogate (half an emoji)" };
  }
  return { ok: true, value: { threadId, runId, kind: "chat", text } };
}

/**
 * `cancelled` denies; `resolved` takes `payload` `true`/`false` or `{ approved, reason? }`.
 * Anything else is refused rather than guessed: approving by mistake runs a tool.
 */
function readDecision(entry: ResumeEntry): ResumeDecision | string {
  const { interruptId } = entry;
  if (entry.status === "cancelled")
    return { interruptId, approved: false, reason: "the approval was cancelled" };
  const payload: unknown = entry.payload;
  if (typeof payload === "boolean") return { interruptId, approved: payload };
  if (
    typeof payload === "object" &&
    payload !== null &&
    typeof (payload as { approved?: unknown }).approved === "boolean"
  ) {
    const { approved, reason } = payload as { approved: boolean; reason?: unknown };
    if (reason !== undefined && typeof reason !== "string")
      return `resume ${interruptId}: payload.reason must be a string`;
    return { interruptId, approved, ...(typeof reason === "string" && reason !== "" ? { reason } : {}) };
  }
  return `resume ${interruptId}: payload must be { approved: boolean, reason?: string } (or a boolean)`;
}

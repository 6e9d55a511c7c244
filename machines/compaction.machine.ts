import { assign, type PromiseActorLogic, setup } from "xstate";
import type { SessionDeps } from "../src/agent/session-deps.js";
import { type ErrorInfo, errorInfo, toErrorInfo } from "../src/errors/error-info.js";
import type { EventBody } from "../src/events/types.js";
import type { GenerateResponse, LlmOptions, Message, TokenUsage } from "../src/llm/types.js";
import { emptyUsage, withoutTools } from "../src/llm/types.js";

/**
 * Cache-friendly compaction: on a fork of the context, ask the model (without tools)
 * for a summary; on success the context becomes ONE user message holding the summary (a stable
 * prefix the provider's prompt cache can hit) and the history is replaced by it. An empty summary
 * or any failure leaves the context and the history as they were.
 */

export interface CompactionInput {
  /** The conversation (no system message). */
  messages: Message[];
  systemPrompt: string;
  options: LlmOptions;
  topic?: string;
  /**
   * Messages that follow the compacted ones and stay in the history verbatim, after the summary
   * (a running chat's messages already persisted): the history is replaced in one write, so a
   * crash never finds it without them. Not part of the output.
   */
  keptTail?: Message[];
  /** The session's dependencies, opaque to the machine: handed to the actors it invokes. */
  deps?: SessionDeps;
}

export type CompactionOutput =
  | { ok: true; messages: Message[]; tokenUsed: number; usage: TokenUsage }
  | { ok: false; usage: TokenUsage; error: ErrorInfo };

export interface CompactionContext {
  messages: Message[];
  systemPrompt: string;
  options: LlmOptions;
  topic: string | null;
  keptTail: Message[];
  summary: Message | null;
  tokenUsed: number;
  usage: TokenUsage;
  error: ErrorInfo | null;
  /** See {@link CompactionInput.deps}. */
  deps: SessionDeps | undefined;
}

/** The instruction appended to the fork. */
export function compactionInstruction(topic: string | null): string {
  const focus = topic
    ? ` Focus on what matters for this topic: ${topic}. Keep other details only where they bear on it.`
    : "";
  return (
    "Summarise the conversation so far so that it can continue from this summary alone. " +
    "Keep the user's goals, decisions made, facts and figures established, tool results still " +
    "relevant, open questions and the current plan. Write it as plain prose and lists; do not " +
    `call tools.${focus}`
  );
}

/** The one user message the context becomes. */
export function summaryMessage(summary: string): Message {
  return { role: "user", content: `[Summary of the conversation so far]\n\n${summary}` };
}

export const compactionMachine = setup({
  types: {
    context: {} as CompactionContext,
    input: {} as CompactionInput,
    output: {} as CompactionOutput,
  },
  actions: {
    report: (_, _params: EventBody) => {},
  },
  actors: {
    /** One non-streaming request; resolves with the response. */
    requestSummary: {} as PromiseActorLogic<
      GenerateResponse,
      { messages: Message[]; options: LlmOptions; deps?: SessionDeps }
    >,
    /** Replaces the persisted history with the given messages. */
    replaceHistory: {} as PromiseActorLogic<void, { messages: Message[]; deps?: SessionDeps }>,
  },
  guards: {
    isSummaryEmpty: ({ event }) => {
      const response = (event as { output?: GenerateResponse }).output;
      return !response || response.content.trim() === "";
    },
  },
}).createMachine({
  id: "compaction",
  context: ({ input }) => ({
    messages: input.messages,
    systemPrompt: input.systemPrompt,
    options: input.options,
    topic: input.topic ?? null,
    keptTail: input.keptTail ?? [],
    summary: null,
    tokenUsed: 0,
    usage: emptyUsage(),
    error: null,
    deps: input.deps,
  }),
  initial: "forking",
  states: {
    forking: {
      entry: [
        {
          type: "report",
          params: ({ context }) => ({
            kind: "ContextCompaction" as const,
            phase: "started" as const,
            ...(context.topic ? { topic: context.topic } : {}),
          }),
        },
        assign({
          messages: ({ context }) => [
            ...context.messages,
            { role: "user" as const, content: compactionInstruction(context.topic) },
          ],
        }),
      ],
      always: "requesting",
    },
    requesting: {
      invoke: {
        src: "requestSummary",
        input: ({ context }) => ({
          messages: [{ role: "system" as const, content: context.systemPrompt }, ...context.messages],
          options: withoutTools(context.options, context.messages),
          deps: context.deps,
        }),
        onDone: [
          {
            guard: "isSummaryEmpty",
            target: "failed",
            actions: assign({
              usage: ({ event }) => event.output.usage,
              error: errorInfo("empty_summary", "the model returned an empty summary"),
            }),
          },
          {
            target: "replacingHistory",
            actions: assign({
              summary: ({ event }) => summaryMessage(event.output.content.trim()),
              tokenUsed: ({ event }) => event.output.usage.completion,
              usage: ({ event }) => event.output.usage,
            }),
          },
        ],
        onError: {
          target: "failed",
          actions: assign({ error: ({ event }) => toErrorInfo(event.error) }),
        },
      },
    },
    replacingHistory: {
      invoke: {
        src: "replaceHistory",
        input: ({ context }) => ({ messages: [context.summary!, ...context.keptTail], deps: context.deps }),
        onDone: "compacted",
        onError: {
          target: "failed",
          actions: assign({ error: ({ event }) => toErrorInfo(event.error) }),
        },
      },
    },
    compacted: {
      type: "final",
      entry: {
        type: "report",
        params: ({ context }) => ({
          kind: "ContextCompaction" as const,
          phase: "completed" as const,
          tokenUsed: context.tokenUsed,
        }),
      },
    },
    failed: {
      type: "final",
      entry: {
        type: "report",
        params: ({ context }) => ({
          kind: "ContextCompaction" as const,
          phase: "failed" as const,
          error: context.error!,
        }),
      },
    },
  },
  output: ({ context }): CompactionOutput =>
    context.error || !context.summary
      ? {
          ok: false,
          usage: context.usage,
          error: context.error ?? errorInfo("internal", "compaction failed", { name: "Error" }),
        }
      : { ok: true, messages: [context.summary], tokenUsed: context.tokenUsed, usage: context.usage },
});

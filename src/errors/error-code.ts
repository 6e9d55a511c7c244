import type { ErrorCode as ReplyErrorCode } from "../contract/reply-error.js";

/** What one {@link AgentloopErrorCode} becomes at each boundary. */
export interface ErrorCodeMapping {
  /** The `error.code` of a failed NATS reply: a fixed list, so clients can rely on it. */
  reply: ReplyErrorCode;
  /** The CLI's exit code when a command ends with this error. */
  exitCode: number;
}

/** Exit code of a mistake the user fixes (a flag, a file, a URL, credentials). */
export const EXIT_USER_MISTAKE = 2;
/** Exit code of a cancelled chat (as for SIGINT). */
export const EXIT_CANCELLED = 130;
/** Exit code of any other failure. */
export const EXIT_FAILURE = 1;

const llmFailure = { reply: "llm_error", exitCode: EXIT_FAILURE } as const;
const userMistake = { reply: "internal", exitCode: EXIT_USER_MISTAKE } as const;
const failure = { reply: "internal", exitCode: EXIT_FAILURE } as const;

/**
 * The one table from an error's `code` to the NATS contract's reply code and the CLI's exit code.
 * Events carry the code itself (in `ErrorInfo`). Every code an {@link AgentloopError} subclass
 * fixes is a key here; an error from outside the hierarchy is `internal`.
 */
export const ERROR_CODE_TABLE = {
  // The model request failed (src/llm/errors.ts).
  rate_limit: llmFailure,
  server_error: llmFailure,
  network: llmFailure,
  stray_tool_markup: llmFailure,
  authentication: llmFailure,
  not_found: llmFailure,
  invalid_request: llmFailure,
  timeout: llmFailure,
  invalid_response: llmFailure,
  context_length_exceeded: llmFailure,
  /** A compaction's summary came back empty. */
  empty_summary: llmFailure,
  /** A chat or a model request was cancelled. */
  cancelled: { reply: "cancelled", exitCode: EXIT_CANCELLED },
  /** The host is closing: the caller's message will not run. */
  host_closing: { reply: "cancelled", exitCode: EXIT_FAILURE },
  /** Every session slot is busy, or the host's memory budget is spent and no session is idle. */
  overloaded: { reply: "overloaded", exitCode: EXIT_FAILURE },
  /** The tenant's token budget for the period is spent: no model request was made. */
  budget_exceeded: { reply: "budget_exceeded", exitCode: EXIT_FAILURE },
  /** The caller may not do this: an approver, not the prompt's sender, decides its tool calls. */
  forbidden: { reply: "forbidden", exitCode: EXIT_FAILURE },
  /** A request named an agent the host does not serve. */
  unknown_agent: { reply: "unknown_agent", exitCode: EXIT_FAILURE },
  /** A session holds more than `--max-session-bytes` even after compaction. */
  session_too_large: { reply: "bad_request", exitCode: EXIT_FAILURE },
  // The user's configuration or command line.
  configuration: userMistake,
  usage: userMistake,
  bus_config: userMistake,
  /** The web UI refused a request (bad body, unknown route, wrong method); it never reaches NATS. */
  http_request: { reply: "bad_request", exitCode: EXIT_FAILURE },
  // The bus (src/bus).
  bus: failure,
  bus_timeout: failure,
  no_responders: failure,
  bus_closed: failure,
  invalid_subject: failure,
  host_silent: failure,
  // Sessions spread over several hosts (src/cluster).
  /**
   * This host lost or handed over the session's lease mid-chat: another host serves it now and
   * finishes the chat from its journal. Answered `unavailable` (retryable), never as the chat's end:
   * a retry of the same id reaches the next owner, which answers it.
   */
  lease_lost: { reply: "unavailable", exitCode: EXIT_FAILURE },
  /** The session is owned by another host (the host forwards the request there). */
  session_owned_elsewhere: { reply: "unavailable", exitCode: EXIT_FAILURE },
  /** No host could take the request now (its shard is changing owner, the owner is unreachable), or JetStream did not answer a write in time, even retried: retry. */
  unavailable: { reply: "unavailable", exitCode: EXIT_FAILURE },
  /** Another host wrote the session's lease first. */
  lease_conflict: failure,
  // The Synadia Agent Protocol client (src/protocol).
  agent_protocol: failure,
  // The persisted history.
  history: failure,
  corrupt_history: failure,
  history_schema_version: failure,
  // Tools (their errors become results the model reads; here for completeness).
  tool: failure,
  tool_not_found: failure,
  tool_arguments: failure,
  tool_cancelled: failure,
  mcp_server_not_running: failure,
  mcp_tool_call: failure,
  // An agent asking another (ask_agent): the typed tool errors the model reads.
  /** The asked session already waits higher up the chain: it would wait on itself. */
  cycle: { reply: "cycle", exitCode: EXIT_FAILURE },
  /** The chain of agents asking agents is at its depth cap. */
  depth_exceeded: failure,
  // `unavailable` (above) also names an asked agent that is not there: no host serves it, its host
  // went silent, or it did not answer in time.
  /** A person denied the asked agent's tool call, or a rule refused the question. */
  denied: failure,
  /** The asked agent's chat failed (its own error follows in the message). */
  agent_failed: failure,
  /** Anything not of the hierarchy. */
  internal: failure,
} as const satisfies Record<string, ErrorCodeMapping>;

/** The stable code of an agentloop error: a key of {@link ERROR_CODE_TABLE}. */
export type AgentloopErrorCode = keyof typeof ERROR_CODE_TABLE;

/** Every code, in the table's order. */
export const AGENTLOOP_ERROR_CODES = Object.keys(ERROR_CODE_TABLE) as AgentloopErrorCode[];

/**
 * True for a code of {@link ERROR_CODE_TABLE}: a string read from the wire or a log before it is
 * trusted as an {@link AgentloopErrorCode}.
 *
 * @example
 * ```ts
 * import { isAgentloopErrorCode } from "agentloop/errors";
 *
 * isAgentloopErrorCode("rate_limit"); // true
 * isAgentloopErrorCode("teapot"); // false
 * ```
 */
export function isAgentloopErrorCode(value: unknown): value is AgentloopErrorCode {
  return typeof value === "string" && Object.hasOwn(ERROR_CODE_TABLE, value);
}

/**
 * The mapping of `code`; a code this version does not know (e.g. from a newer peer) maps as `internal`.
 *
 * @example
 * ```ts
 * import { mappingOf } from "agentloop/errors";
 *
 * mappingOf("rate_limit"); // { reply: "llm_error", exitCode: 1 }
 * mappingOf("a_code_from_a_newer_host").reply; // "internal"
 * ```
 */
export function mappingOf(code: string): ErrorCodeMapping {
  return isAgentloopErrorCode(code) ? ERROR_CODE_TABLE[code] : ERROR_CODE_TABLE.internal;
}

/**
 * The exit code of a remote `chat` answered with a failed reply: the host already mapped the
 * error to its reply code, so the CLI reads that (a cancelled chat exits as a local one does).
 *
 * @example
 * ```ts
 * import { ChatReply } from "agentloop/bus";
 * import { exitCodeOfReply } from "agentloop/errors";
 *
 * declare const data: string; // a chat request's reply, as received
 * const reply = ChatReply.parse(JSON.parse(data));
 * if (!reply.ok) process.exitCode = exitCodeOfReply(reply.error.code); // 130 when cancelled, else 1
 * ```
 */
export function exitCodeOfReply(reply: ReplyErrorCode): number {
  return reply === "cancelled" ? EXIT_CANCELLED : EXIT_FAILURE;
}

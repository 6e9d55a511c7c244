import { describe, expect, it } from "vitest";
import { ChatCancelledError, ChatFailedError } from "../../src/agent/chat-errors.js";
import {
  BusClosedError,
  BusConfigError,
  BusError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "../../src/bus/bus-errors.js";
import { ERROR_CODES as CONTRACT_ERROR_CODES } from "../../src/bus/contract.js";
import { HostSilentError } from "../../src/bus/request-with-heartbeat.js";
import { UsageError } from "../../src/cli/cli-context.js";
import { exitCodeOf } from "../../src/cli/main.js";
import { LeaseLostError } from "../../src/cluster/lease-fence.js";
import {
  LeaseConflictError,
  type LeaseRecord,
  SessionOwnedElsewhereError,
} from "../../src/cluster/session-lease.js";
import { AgentDefinitionsError } from "../../src/config/agent-definitions.js";
import { ConfigFileError } from "../../src/config/config-file-error.js";
import {
  CorruptHistoryError,
  HistoryError,
  HistorySchemaVersionError,
} from "../../src/context/history-errors.js";
import { NotARecordError } from "../../src/context/jetstream-record-log.js";
import { InternalError } from "../../src/errors/internal-error.js";
import { UnknownAgentError } from "../../src/errors/unknown-agent-error.js";
import { describeFailure } from "../../src/host/describe-failure.js";
import { SessionManagerClosedError, SessionManagerOverloadedError } from "../../src/host/session-manager.js";
import { HttpError } from "../../src/http/http-io.js";
import { ConfigurationError as ConfigurationErrorFromOldPath } from "../../src/llm/configuration-error.js";
import {
  AuthenticationError,
  CancelledError,
  ContextLengthExceededError,
  InvalidRequestError,
  InvalidResponseError,
  ModelNotFoundError,
  NetworkError,
  RateLimitError,
  RequestTimeoutError,
  ServerError,
  StrayToolMarkupError,
} from "../../src/llm/errors.js";
import { emptyUsage } from "../../src/llm/types.js";
import { McpServerNotRunningError, McpToolCallError } from "../../src/mcp/mcp-errors.js";
import { AgentServiceError, AgentStreamTimeoutError } from "../../src/protocol/agent-client.js";
import { CallerGoneError } from "../../src/protocol/caller-gone-error.js";
import {
  AGENTLOOP_ERROR_CODES,
  AgentloopError,
  BudgetExceededError,
  ConfigurationError,
  ERROR_CODE_TABLE,
  errorInfo,
  exitCodeOfReply,
  ForbiddenError,
  mappingOf,
} from "../../src/public/errors.js";
import { UnknownToolSetError } from "../../src/tools/builtin/index.js";
import {
  BackgroundTaskCancelledError,
  ToolArgumentsError,
  ToolCancelledError,
  ToolError,
  ToolNotFoundError,
} from "../../src/tools/tool-errors.js";

/** Every error class the project throws, with the code it fixes and what that becomes at each boundary. */
const CASES: Array<{ error: AgentloopError; code: string; reply: string; exit: number; retryable: boolean }> =
  [
    {
      error: new RateLimitError("slow down", { statusCode: 429 }),
      code: "rate_limit",
      reply: "llm_error",
      exit: 1,
      retryable: true,
    },
    { error: new ServerError("529"), code: "server_error", reply: "llm_error", exit: 1, retryable: true },
    { error: new NetworkError("reset"), code: "network", reply: "llm_error", exit: 1, retryable: true },
    {
      error: new StrayToolMarkupError("markup"),
      code: "stray_tool_markup",
      reply: "llm_error",
      exit: 1,
      retryable: true,
    },
    {
      error: new AuthenticationError("401"),
      code: "authentication",
      reply: "llm_error",
      exit: 1,
      retryable: false,
    },
    {
      error: new ModelNotFoundError("404"),
      code: "not_found",
      reply: "llm_error",
      exit: 1,
      retryable: false,
    },
    {
      error: new InvalidRequestError("400"),
      code: "invalid_request",
      reply: "llm_error",
      exit: 1,
      retryable: false,
    },
    {
      error: new RequestTimeoutError("late"),
      code: "timeout",
      reply: "llm_error",
      exit: 1,
      retryable: false,
    },
    {
      error: new InvalidResponseError("junk"),
      code: "invalid_response",
      reply: "llm_error",
      exit: 1,
      retryable: false,
    },
    {
      error: new ContextLengthExceededError("long"),
      code: "context_length_exceeded",
      reply: "llm_error",
      exit: 1,
      retryable: false,
    },
    {
      error: new CancelledError("cancelled"),
      code: "cancelled",
      reply: "cancelled",
      exit: 130,
      retryable: false,
    },
    {
      error: new ChatCancelledError(emptyUsage()),
      code: "cancelled",
      reply: "cancelled",
      exit: 130,
      retryable: false,
    },
    {
      error: new CallerGoneError("_INBOX.gone"),
      code: "cancelled",
      reply: "cancelled",
      exit: 130,
      retryable: false,
    },
    {
      error: new SessionManagerClosedError(),
      code: "host_closing",
      reply: "cancelled",
      exit: 1,
      retryable: false,
    },
    {
      error: new SessionManagerOverloadedError(3),
      code: "overloaded",
      reply: "overloaded",
      exit: 1,
      retryable: true,
    },
    {
      error: new BudgetExceededError('tenant "B" used its budget'),
      code: "budget_exceeded",
      reply: "budget_exceeded",
      exit: 1,
      retryable: false,
    },
    {
      error: new ForbiddenError("the sender cannot approve its own call", "self-approval"),
      code: "forbidden",
      reply: "forbidden",
      exit: 1,
      retryable: false,
    },
    {
      error: new ConfigurationError("bad"),
      code: "configuration",
      reply: "internal",
      exit: 2,
      retryable: false,
    },
    {
      error: new ConfigFileError("a.json", "bad"),
      code: "configuration",
      reply: "internal",
      exit: 2,
      retryable: false,
    },
    {
      error: new AgentDefinitionsError("a.json", "bad"),
      code: "configuration",
      reply: "internal",
      exit: 2,
      retryable: false,
    },
    {
      error: new UnknownToolSetError("x", []),
      code: "configuration",
      reply: "internal",
      exit: 2,
      retryable: false,
    },
    { error: new UsageError("bad flag"), code: "usage", reply: "internal", exit: 2, retryable: false },
    {
      error: new BusConfigError("bad url"),
      code: "bus_config",
      reply: "internal",
      exit: 2,
      retryable: false,
    },
    { error: new BusError("bus"), code: "bus", reply: "internal", exit: 1, retryable: false },
    {
      error: new BusTimeoutError("a.b", 10),
      code: "bus_timeout",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new NoRespondersError("a.b"),
      code: "no_responders",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    { error: new BusClosedError(), code: "bus_closed", reply: "internal", exit: 1, retryable: false },
    {
      error: new InvalidSubjectError("a..b"),
      code: "invalid_subject",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new HostSilentError("a.b", "a.hb", 50),
      code: "host_silent",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    { error: new HistoryError("history"), code: "history", reply: "internal", exit: 1, retryable: false },
    {
      error: new CorruptHistoryError({ agent: "a", session: "s", position: 1 }, "not JSON"),
      code: "corrupt_history",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new HistorySchemaVersionError(9, 1, "h.db"),
      code: "history_schema_version",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    { error: new ToolError("tool"), code: "tool", reply: "internal", exit: 1, retryable: false },
    {
      error: new ToolNotFoundError("t"),
      code: "tool_not_found",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new ToolArgumentsError("args"),
      code: "tool_arguments",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new ToolCancelledError("t"),
      code: "tool_cancelled",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new BackgroundTaskCancelledError("task-1", "reset"),
      code: "tool_cancelled",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new McpServerNotRunningError("srv", "down"),
      code: "mcp_server_not_running",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new McpToolCallError("srv", "failed"),
      code: "mcp_tool_call",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new LeaseLostError("the lease expired", 3),
      code: "lease_lost",
      reply: "unavailable",
      exit: 1,
      retryable: true,
    },
    {
      error: new SessionOwnedElsewhereError("a", "s", { host: "h2", epoch: 2 } as LeaseRecord),
      code: "session_owned_elsewhere",
      reply: "unavailable",
      exit: 1,
      retryable: true,
    },
    {
      error: new LeaseConflictError("a.s"),
      code: "lease_conflict",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new NotARecordError(7, "not a history record"),
      code: "corrupt_history",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new AgentServiceError(429, "too many prompts"),
      code: "agent_protocol",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new AgentStreamTimeoutError(1000),
      code: "agent_protocol",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
    {
      error: new HttpError(404, "not_found", "no route /api/nothing"),
      code: "http_request",
      reply: "bad_request",
      exit: 1,
      retryable: false,
    },
    {
      error: new UnknownAgentError("ghost", ["bot"]),
      code: "unknown_agent",
      reply: "unknown_agent",
      exit: 1,
      retryable: false,
    },
    {
      error: new InternalError("no package.json"),
      code: "internal",
      reply: "internal",
      exit: 1,
      retryable: false,
    },
  ];

describe("the error code table", () => {
  it.each(CASES)("$error.name has code $code, replies $reply and exits $exit", ({
    error,
    code,
    reply,
    exit,
    retryable,
  }) => {
    expect(error).toBeInstanceOf(AgentloopError);
    expect(error.name).toBe(error.constructor.name);
    expect(error.code).toBe(code);
    expect(error.retryable).toBe(retryable);
    expect(mappingOf(error.code)).toEqual({ reply, exitCode: exit });
    expect(describeFailure(error).code).toBe(reply);
    expect(exitCodeOf(error)).toBe(exit);
  });

  it("maps every code to one of the contract's reply codes and to exit code 1, 2 or 130", () => {
    for (const code of AGENTLOOP_ERROR_CODES) {
      expect(CONTRACT_ERROR_CODES).toContain(ERROR_CODE_TABLE[code].reply);
      expect([1, 2, 130]).toContain(ERROR_CODE_TABLE[code].exitCode);
    }
  });

  it("maps an error from outside the hierarchy, and a code it does not know, as internal (exit 1)", () => {
    expect(describeFailure(new TypeError("x is undefined"))).toEqual({
      code: "internal",
      message: "x is undefined",
    });
    expect(describeFailure("a string")).toEqual({ code: "internal", message: "a string" });
    expect(exitCodeOf(new TypeError("x"))).toBe(1);
    expect(mappingOf("from_a_newer_host")).toEqual({ reply: "internal", exitCode: 1 });
  });

  it("answers a failed chat by its cause's code: a rate limit is llm_error, an unknown failure internal; both exit 1", () => {
    const rateLimited = new ChatFailedError(
      errorInfo("rate_limit", "slow down", { retryable: true, status: 429, name: "RateLimitError" }),
      emptyUsage(),
    );
    expect(rateLimited).toMatchObject({ code: "rate_limit", retryable: true, status: 429 });
    expect(describeFailure(rateLimited)).toEqual({ code: "llm_error", message: "slow down" });
    expect(exitCodeOf(rateLimited)).toBe(1);
    const broken = new ChatFailedError(
      errorInfo("internal", "the chat failed", { name: "Error" }),
      emptyUsage(),
    );
    expect(describeFailure(broken).code).toBe("internal");
    expect(exitCodeOf(broken)).toBe(1);
  });

  it("exits a remote chat 130 on a cancelled reply and 1 on any other", () => {
    for (const reply of CONTRACT_ERROR_CODES)
      expect(exitCodeOfReply(reply)).toBe(reply === "cancelled" ? 130 : 1);
  });

  it("keeps ConfigurationError one class at its old import path", () => {
    expect(ConfigurationErrorFromOldPath).toBe(ConfigurationError);
  });
});

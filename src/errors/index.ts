export { AgentloopError, type AgentloopErrorOptions, isAgentloopError } from "./agentloop-error.js";
export { BudgetExceededError } from "./budget-exceeded-error.js";
export { ConfigurationError } from "./configuration-error.js";
export { describeError } from "./describe-error.js";
export {
  AGENTLOOP_ERROR_CODES,
  type AgentloopErrorCode,
  ERROR_CODE_TABLE,
  type ErrorCodeMapping,
  EXIT_CANCELLED,
  EXIT_FAILURE,
  EXIT_USER_MISTAKE,
  exitCodeOfReply,
  isAgentloopErrorCode,
  mappingOf,
} from "./error-code.js";
export { type ErrorInfo, errorInfo, isErrorInfo, toErrorInfo } from "./error-info.js";
export { ForbiddenError } from "./forbidden-error.js";

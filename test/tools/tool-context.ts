import type { Message } from "../../src/llm/types.js";
import type { ToolContext } from "../../src/tools/tool-set.js";

/** A ToolContext for tests; `appended` collects what tools add with `appendMessage`. */
export function createTestToolContext(
  overrides: Partial<ToolContext> = {},
): ToolContext & { appended: Message[] } {
  const appended: Message[] = [];
  return {
    signal: new AbortController().signal,
    appendMessage: (message) => appended.push(message),
    agent: "tester",
    session: "s1",
    ...overrides,
    appended,
  };
}

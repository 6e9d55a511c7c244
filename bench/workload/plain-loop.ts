import type { Bus } from "../../src/bus/bus.js";
import type { LlmBackend, LlmOptions, Message, ToolCall } from "../../src/llm/types.js";
import type { Tool } from "../../src/tools/define-tool.js";
import { type BaselineEvents, createBaselineEvents } from "./baseline-events.js";

/** What both baselines need: the same model, tool and limits agentloop gets (shared by sessions). */
export interface BaselineParams {
  backend: LlmBackend;
  tool: Tool;
  systemPrompt: string;
  model: string;
  maxIterations: number;
  /** Events on when set. */
  bus?: Bus;
  agent: string;
}

/** The result of one baseline chat. */
export interface BaselineChatResult {
  result: string;
  messages: Message[];
}

let nextChat = 0;

/**
 * The floor: the agentic loop as a plain async function. Generate (streaming), stop on text, else
 * run the tool calls concurrently, append the results in call order, repeat; the last iteration
 * is sent without tools.
 */
export async function runPlainChat(
  params: BaselineParams,
  session: string,
  text: string,
): Promise<BaselineChatResult> {
  const { backend, tool, maxIterations } = params;
  const events = createBaselineEvents(params.bus, params.agent, session, `plain-${nextChat++}`);
  const messages: Message[] = [
    { role: "system", content: params.systemPrompt },
    { role: "user", content: text },
  ];
  const options: LlmOptions = { model: params.model, tools: [tool.definition] };
  const finalOptions: LlmOptions = { model: params.model };
  const controller = new AbortController();
  events?.emit("ChatStarted", 0, { text });
  for (let iteration = 1; ; iteration++) {
    const isFinal = iteration >= maxIterations;
    events?.emit("ModelRequest", iteration, { final: isFinal, messageCount: messages.length });
    const response = await backend.generateStream(
      { messages, options: isFinal ? finalOptions : options, signal: controller.signal },
      {
        onTextDelta: (delta) => events?.emit("ModelTextDelta", iteration, { delta }),
        onReasoningDelta: (delta) => events?.emit("ModelReasoningDelta", iteration, { delta }),
      },
    );
    const assistant: Message = { role: "assistant", content: response.content };
    if (response.toolCalls.length > 0) assistant.toolCalls = response.toolCalls;
    messages.push(assistant);
    if (response.toolCalls.length === 0 || isFinal) {
      events?.emit("ChatCompleted", 0, { result: response.content, usage: response.usage });
      return { result: response.content, messages };
    }
    const results = await Promise.all(
      response.toolCalls.map((call) =>
        invokeTool(
          tool,
          call,
          { iteration, signal: controller.signal, agent: params.agent, session },
          events,
        ),
      ),
    );
    messages.push(...results);
  }
}

/** One tool call: a thrown error becomes an `{"error": …}` result, as in agentloop. */
export async function invokeTool(
  tool: Tool,
  call: ToolCall,
  where: { iteration: number; signal: AbortSignal; agent: string; session: string },
  events: BaselineEvents | undefined,
): Promise<Message> {
  const { iteration, signal, agent, session } = where;
  events?.emit("ToolCallStarted", iteration, {
    toolName: call.name,
    toolCallId: call.id,
    arguments: call.arguments,
  });
  let result: string;
  try {
    if (call.name !== tool.definition.name) throw new Error(`tool not found: ${call.name}`);
    result = await tool.invoke(call.arguments, {
      signal,
      appendMessage: () => {},
      agent,
      session,
    });
  } catch (error) {
    result = JSON.stringify({ error: error instanceof Error ? error.message : String(error) });
  }
  events?.emit("ToolCallCompleted", iteration, { toolName: call.name, toolCallId: call.id, result });
  return { role: "tool", toolCallId: call.id, toolName: call.name, content: result };
}

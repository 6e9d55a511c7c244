import type {
  BackendSink,
  GenerateRequest,
  GenerateResponse,
  LlmBackend,
  Message,
} from "../../src/llm/types.js";

export interface ZeroLatencyBackendParams {
  /** Tool-call steps before the final text answer (10 → 11 requests per chat). */
  toolSteps: number;
  /** Text deltas streamed by every response. Default 20. */
  deltasPerStep?: number;
  /** The tool each tool step calls. */
  toolName: string;
  /** The tool call's arguments (a JSON string). */
  toolArguments: string;
  /**
   * Called before the response of the request that follows `step` completed tool steps (0-based);
   * may return a promise to hold the request there (the memory bench parks chats mid-flight).
   */
  beforeStep?: (step: number) => void | Promise<void>;
  /** Yield to the event loop before each delta, as deltas coming off a socket would. */
  isPaced?: boolean;
  /** Told about each delta as it is streamed (the latency bench stamps the time). */
  onDelta?: (text: string) => void;
}

/**
 * The model of the benchmarks: no network, no timers, no bookkeeping. Each response streams
 * `deltasPerStep` text deltas, then either calls the tool once or (after `toolSteps` tool steps)
 * answers with text. Which step a request is at is read from its own messages (assistant turns
 * since the last user message), so one instance serves any number of concurrent sessions.
 *
 * Written for the bench instead of using ScriptedBackend: that one deep-copies every request
 * (`structuredClone` of the whole conversation) and estimates tokens from it, costs that grow
 * with the conversation and would be charged to the loop under test.
 */
export class ZeroLatencyBackend implements LlmBackend {
  readonly provider = "bench";
  readonly #toolSteps: number;
  readonly #deltas: string[];
  readonly #text: string;
  readonly #toolName: string;
  readonly #toolArguments: string;
  readonly #beforeStep: ZeroLatencyBackendParams["beforeStep"];
  readonly #isPaced: boolean;
  readonly #onDelta: ZeroLatencyBackendParams["onDelta"];

  constructor(params: ZeroLatencyBackendParams) {
    const count = params.deltasPerStep ?? 20;
    this.#toolSteps = params.toolSteps;
    this.#deltas = Array.from({ length: count }, (_, index) => `word${index} `);
    this.#text = this.#deltas.join("");
    this.#toolName = params.toolName;
    this.#toolArguments = params.toolArguments;
    this.#beforeStep = params.beforeStep;
    this.#isPaced = params.isPaced ?? false;
    this.#onDelta = params.onDelta;
  }

  /** The number of requests one chat makes. */
  get requestsPerChat(): number {
    return this.#toolSteps + 1;
  }

  async generate(request: GenerateRequest): Promise<GenerateResponse> {
    return this.#respond(completedSteps(request.messages));
  }

  async generateStream(request: GenerateRequest, sink: BackendSink): Promise<GenerateResponse> {
    const step = completedSteps(request.messages);
    if (this.#beforeStep) await this.#beforeStep(step);
    const onDelta = this.#onDelta;
    for (const delta of this.#deltas) {
      if (this.#isPaced) await new Promise((resolve) => setImmediate(resolve));
      request.signal?.throwIfAborted();
      if (onDelta) onDelta(delta);
      sink.onTextDelta(delta);
    }
    return this.#respond(step);
  }

  #respond(step: number): GenerateResponse {
    const usage = { prompt: 100 + step * 30, completion: 20, total: 120 + step * 30, cached: 0 };
    if (step >= this.#toolSteps) {
      return { content: this.#text, toolCalls: [], finishReason: "stop", usage };
    }
    return {
      content: this.#text,
      toolCalls: [{ id: `call_${step + 1}`, name: this.#toolName, arguments: this.#toolArguments }],
      finishReason: "tool_calls",
      usage,
    };
  }
}

/** Assistant turns since the last user message: how many steps of this chat are done. */
function completedSteps(messages: readonly Message[]): number {
  let steps = 0;
  for (let index = messages.length - 1; index >= 0; index--) {
    const role = messages[index]!.role;
    if (role === "user") break;
    if (role === "assistant") steps++;
  }
  return steps;
}

import { type ChildProcess, spawn } from "node:child_process";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { AgentEvent } from "../../src/events/types.js";
import {
  anthropicError,
  anthropicSse,
  type FakeResponse,
  type OpenAIReply,
  type OpenAITurn,
  openAIError,
  type RecordedRequest,
  startFakeAnthropic,
  startFakeOpenAI,
  type TurnSpec,
} from "../../src/testing/index.js";
import { assertFreshBuild } from "./fresh-build.js";

/**
 * Helpers for the CLI suites: run `main()` in-process with captured output, spawn the built
 * `agentloop` binary as a real process, and a fake provider server per provider that a scripted
 * conversation (`turn(...)` from fake-openai) drives the same way for Anthropic and both OpenAI
 * APIs, with readers for what each wire format put in a request.
 */

/** What one CLI run left behind. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment a run sees: nothing from the developer's shell (no real keys, no real URLs). */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", ...extra };
}

class TextCapture extends Writable {
  text = "";

  override _write(
    chunk: Buffer | string,
    _encoding: BufferEncoding,
    callback: (error?: Error | null) => void,
  ) {
    this.text += typeof chunk === "string" ? chunk : chunk.toString("utf8");
    callback();
  }
}

/**
 * Runs `main(argv)` in this process with stdout / stderr captured (not TTYs) and an env that holds
 * only PATH and `env`.
 */
export async function runCli(
  argv: readonly string[],
  options: { env?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<CliRun> {
  // Imported lazily so a suite's helpers load even while main's command modules are being written.
  const { main } = await import("../../src/cli/main.js");
  const stdout = new TextCapture();
  const stderr = new TextCapture();
  const code = await main(argv, {
    stdout,
    stderr,
    env: cleanEnv(options.env),
    signal: options.signal ?? new AbortController().signal,
  });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** The built executable (`npm run build`; `npm test` builds before vitest runs). */
export const BIN_PATH = fileURLToPath(new URL("../../dist/src/cli/bin.js", import.meta.url));

/** A spawned binary: the child (to signal it) and its outcome. */
export interface RunningBinary {
  child: ChildProcess;
  /** Resolves when the process exits; rejects when it is still running after `timeoutMs`. */
  result: Promise<CliRun>;
}

/**
 * Spawns `node dist/src/cli/bin.js ...argv` with an env of PATH plus `env`. A child still running
 * after `timeoutMs` (default 60 s: on a loaded machine one short chat took over 20 s) is killed and
 * `result` rejects.
 * @throws Error at once when dist/ is missing or older than a source file (see assertFreshBuild).
 */
export function startBinary(
  argv: readonly string[],
  options: { env?: Record<string, string>; timeoutMs?: number; input?: string } = {},
): RunningBinary {
  assertFreshBuild();
  const child = spawn(process.execPath, [BIN_PATH, ...argv], {
    env: cleanEnv(options.env),
    // `input`: piped to stdin, then end of input (otherwise stdin is empty).
    stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  if (options.input !== undefined) child.stdin?.end(options.input);
  const result = new Promise<CliRun>((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (text: string) => {
      stdout += text;
    });
    child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      stderr += text;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`agentloop ${argv.join(" ")} did not exit; stdout: ${stdout} stderr: ${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
  });
  return { child, result };
}

/** Runs the built binary to its exit (see {@link startBinary}). */
export function runBinary(
  argv: readonly string[],
  options: { env?: Record<string, string>; timeoutMs?: number; input?: string } = {},
): Promise<CliRun> {
  return startBinary(argv, options).result;
}

/**
 * Resolves once `condition` holds, checking every few milliseconds; rejects after `timeoutMs`
 * (default 60 s: a fresh process on a machine with twenty runnable threads on two cores took over
 * 10 s to load the CLI and do its first step; the limit only says when to give up, never how fast).
 */
export async function waitFor(condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("waitFor: the condition did not hold in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The non-empty lines of a text. */
export function linesOf(text: string): string[] {
  return text.split("\n").filter((line) => line !== "" && !LOAD_NOTICE.test(line));
}

/**
 * A host's notice that a renewal of its own lease took longer than its interval: it says how busy
 * the machine was, not what the command did, and a test on a loaded machine may see it anywhere.
 */
const LOAD_NOTICE = /: this host's lease renewal (took|failed after) \d+ ms \(/;

/** `text` without the host's notices of slow lease renewals (see {@link linesOf}). */
export function withoutLoadNotices(text: string): string {
  return text
    .split("\n")
    .filter((line) => !LOAD_NOTICE.test(line))
    .join("\n");
}

/** The lines of a stack trace, if any leaked into `text`. */
export function stackLines(text: string): string[] {
  return text.split("\n").filter((line) => /^\s+at /.test(line));
}

/** The last line of `--events jsonl` output. */
export interface ResultLine {
  kind: "Result";
  result: string;
  usage: { prompt: number; completion: number; total: number; cached: number };
}

/** `--events jsonl` output: every line parsed (a line that is not JSON fails the test). */
export function parseJsonl(stdout: string): { events: AgentEvent[]; last: ResultLine } {
  const parsed = linesOf(stdout).map((line) => JSON.parse(line) as AgentEvent | ResultLine);
  const last = parsed.pop();
  if (last?.kind !== "Result")
    throw new Error(`the last jsonl line is not a Result: ${JSON.stringify(last)}`);
  return { events: parsed as AgentEvent[], last };
}

// ---------------------------------------------------------------------------------------------
// Fake providers

/** The hosted providers the CLI can talk to. */
export type HostedProvider = "anthropic" | "openai-chat" | "openai-responses";
export const HOSTED_PROVIDERS: readonly HostedProvider[] = ["anthropic", "openai-chat", "openai-responses"];

/**
 * A fake provider server with a scripted conversation: request N (0-based) gets reply N; a request
 * beyond the script gets a non-retryable 400 naming the problem, so an extra request fails fast.
 */
export interface FakeProvider {
  provider: HostedProvider;
  /** What `--base-url` takes for this provider. */
  baseUrl: string;
  /** `--provider P --base-url URL`. */
  flags: string[];
  /** The key variable the provider reads, set to a dummy. */
  env: Record<string, string>;
  /** The model requests' parsed bodies, in order. */
  bodies(): Record<string, unknown>[];
  close(): Promise<void>;
}

/** A reply: a scripted turn (rendered in the provider's wire format) or a raw response. */
export type ProviderReply = OpenAIReply;

export async function startFakeProvider(
  provider: HostedProvider,
  script: readonly ProviderReply[],
): Promise<FakeProvider> {
  if (provider === "anthropic") {
    const server = await startFakeAnthropic((request, index) => {
      const reply = script[index];
      if (!reply)
        return anthropicError(
          400,
          "invalid_request_error",
          `fake: no reply scripted for request ${index + 1}`,
        );
      return reply.type === "turn" ? anthropicTurn(reply, isStreamingRequest(request)) : reply;
    });
    return {
      provider,
      baseUrl: server.url,
      flags: ["--provider", provider, "--base-url", server.url],
      env: { ANTHROPIC_API_KEY: "test" },
      bodies: server.bodies,
      close: server.close,
    };
  }
  const endpoint = provider === "openai-chat" ? "chat" : "responses";
  const server = await startFakeOpenAI({
    [endpoint]: (_request: RecordedRequest, index: number) =>
      script[index] ?? openAIError(400, `fake: no reply scripted for request ${index + 1}`),
  });
  return {
    provider,
    baseUrl: server.baseUrl,
    flags: ["--provider", provider, "--base-url", server.baseUrl],
    env: { OPENAI_API_KEY: "test" },
    bodies: () => server.requestsTo(endpoint).map((request) => request.body as Record<string, unknown>),
    close: server.close,
  };
}

function isStreamingRequest(request: RecordedRequest): boolean {
  return (request.body as { stream?: unknown } | undefined)?.stream === true;
}

/** A scripted turn as Anthropic sends it: an SSE stream of content blocks, or a message body. */
export function anthropicTurn(spec: TurnSpec, streaming: boolean): FakeResponse {
  const usage = spec.usage ?? { prompt: 10, completion: 5 };
  const texts = spec.text === undefined ? [] : typeof spec.text === "string" ? [spec.text] : spec.text;
  const calls = spec.toolCalls ?? [];
  const stopReason = calls.length > 0 ? "tool_use" : "end_turn";
  const model = spec.model ?? "claude-fake";
  if (!streaming) {
    const content = [
      ...(texts.length > 0 ? [{ type: "text", text: texts.join(""), citations: null }] : []),
      ...calls.map((call) => ({
        type: "tool_use",
        id: call.id,
        name: call.name,
        input: JSON.parse(call.arguments),
      })),
    ];
    return {
      type: "json",
      body: {
        id: "msg_fake",
        type: "message",
        role: "assistant",
        model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        usage: {
          input_tokens: usage.prompt,
          output_tokens: usage.completion,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: usage.cached ?? 0,
        },
      },
    };
  }
  const events: Array<{ type: string; [field: string]: unknown }> = [
    {
      type: "message_start",
      message: {
        id: "msg_fake",
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: usage.prompt,
          output_tokens: 1,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: usage.cached ?? 0,
        },
      },
    },
  ];
  let index = 0;
  if (texts.length > 0) {
    events.push({ type: "content_block_start", index, content_block: { type: "text", text: "" } });
    for (const text of texts) {
      events.push({ type: "content_block_delta", index, delta: { type: "text_delta", text } });
    }
    events.push({ type: "content_block_stop", index });
    index += 1;
  }
  for (const call of calls) {
    events.push({
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: call.id, name: call.name, input: {} },
    });
    const middle = Math.ceil(call.arguments.length / 2);
    for (const part of [call.arguments.slice(0, middle), call.arguments.slice(middle)]) {
      events.push({
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: part },
      });
    }
    events.push({ type: "content_block_stop", index });
    index += 1;
  }
  events.push(
    {
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: usage.completion },
    },
    { type: "message_stop" },
  );
  return { type: "sse", frames: anthropicSse(events) };
}

// ---------------------------------------------------------------------------------------------
// Reading requests, per wire format

type Body = Record<string, unknown>;

function records(value: unknown): Body[] {
  return Array.isArray(value)
    ? value.filter((item): item is Body => typeof item === "object" && item !== null)
    : [];
}

/** The names of the tools the model could call with this request (none when tool_choice is none). */
export function callableTools(provider: HostedProvider, body: Body): string[] {
  const choice = body.tool_choice;
  if (choice === "none" || (typeof choice === "object" && (choice as Body | null)?.type === "none"))
    return [];
  return records(body.tools).map((tool) =>
    String(provider === "openai-chat" ? (tool.function as Body | undefined)?.name : tool.name),
  );
}

/** The tool results the request carries back to the model. */
export function toolResults(provider: HostedProvider, body: Body): Array<{ callId: string; output: string }> {
  if (provider === "anthropic") {
    return records(body.messages)
      .flatMap((message) => records(message.content))
      .filter((block) => block.type === "tool_result")
      .map((block) => ({
        callId: String(block.tool_use_id),
        output:
          typeof block.content === "string"
            ? block.content
            : records(block.content)
                .map((part) => String(part.text ?? ""))
                .join(""),
      }));
  }
  if (provider === "openai-chat") {
    return records(body.messages)
      .filter((message) => message.role === "tool")
      .map((message) => ({ callId: String(message.tool_call_id), output: String(message.content) }));
  }
  return records(body.input)
    .filter((item) => item.type === "function_call_output")
    .map((item) => ({ callId: String(item.call_id), output: String(item.output) }));
}

/** The conversation part of a request (messages or input items) as JSON text, to search in. */
export function conversationText(body: Body): string {
  return JSON.stringify(body.messages ?? body.input ?? null);
}

/** An error reply in the provider's own shape (Anthropic's `{type: "error", error}` or OpenAI's `{error}`). */
export function providerError(
  provider: HostedProvider,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): FakeResponse {
  if (provider === "anthropic") {
    const type =
      status === 401 ? "authentication_error" : status >= 500 ? "api_error" : "invalid_request_error";
    return anthropicError(status, type, message, headers);
  }
  return openAIError(status, message, { headers });
}

/** A text-only turn. */
export function textTurn(...text: string[]): OpenAITurn {
  return { type: "turn", text };
}

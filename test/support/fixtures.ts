import {
  anthropicMessage,
  anthropicStream,
  type FakeResponse,
  loadTranscript,
} from "../../src/testing/index.js";

/**
 * The project's own recorded transcripts (test/fixtures/<provider>/), loaded by name for the
 * fake servers of the testing kit.
 */

const FIXTURES = new URL("../fixtures/", import.meta.url);

/** A transcript under `test/fixtures/` by its path, e.g. `openai-chat/text-stream.sse`. */
export function loadOpenAITranscript(name: string): FakeResponse {
  return loadTranscript(new URL(name, FIXTURES));
}

/** The frames of `test/fixtures/anthropic/<name>.sse`, in order. */
export function loadAnthropicTranscript(name: string): string[] {
  const reply = loadTranscript(new URL(`anthropic/${name}.sse`, FIXTURES));
  if (reply.type !== "sse") throw new Error(`anthropic/${name}.sse is not a stream`);
  return reply.frames;
}

/** The parsed body of `test/fixtures/anthropic/<name>.json` (a non-streaming response). */
export function loadAnthropicMessage(name: string): unknown {
  const reply = loadTranscript(new URL(`anthropic/${name}.json`, FIXTURES));
  if (reply.type !== "json") throw new Error(`anthropic/${name}.json is not a JSON body`);
  return reply.body;
}

/** `test/fixtures/anthropic/<name>.sse` as a streamed reply. */
export function anthropicFixture(
  name: string,
  options: Parameters<typeof anthropicStream>[1] = {},
): FakeResponse {
  return anthropicStream(loadAnthropicTranscript(name), options);
}

/** `test/fixtures/anthropic/<name>.json` as a non-streaming reply. */
export function anthropicMessageFixture(name: string): FakeResponse {
  return anthropicMessage(loadAnthropicMessage(name));
}

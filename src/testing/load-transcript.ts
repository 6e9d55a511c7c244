import { readFileSync } from "node:fs";
import type { FakeResponse } from "./fake-http-server.js";

/**
 * Splits an SSE transcript into frames, each ending with its blank line (CRLF normalised), ready
 * for an `sse` {@link FakeResponse}.
 */
export function parseSseFrames(transcript: string): string[] {
  return transcript
    .replace(/\r\n/g, "\n")
    .split(/\n\n+/)
    .filter((frame) => frame.trim() !== "")
    .map((frame) => `${frame}\n\n`);
}

/**
 * A transcript file as a reply of the fake servers: a `.json` file is served as a 200 JSON body,
 * anything else (`.sse`: SSE frames exactly as the provider sent them) as a stream, frame by frame.
 */
export function loadTranscript(path: string | URL): FakeResponse {
  const text = readFileSync(path, "utf8");
  if (String(path).endsWith(".json")) return { type: "json", body: JSON.parse(text) };
  return { type: "sse", frames: parseSseFrames(text) };
}

import { type BaseEvent, EventType, HttpAgent } from "@ag-ui/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../../src/bus/local-bus.js";
import { createAguiDoor } from "../../../src/doors/agui/agui-door.js";
import { type RunningHost, startHost } from "../../../src/host/start-host.js";
import { ScriptedBackend } from "../../../src/testing/index.js";
import { startUiServer, type UiServer } from "../../../src/ui/ui-server.js";

/**
 * The AG-UI door on the in-process bus (no JetStream): the door's own buffer numbers the events,
 * and a reconnect is served from it.
 */

let bus: LocalBus;
let host: RunningHost;
let server: UiServer;
let url: string;

beforeAll(async () => {
  bus = new LocalBus();
  const model = new ScriptedBackend(() => ({ text: "one two three", deltas: ["one ", "two ", "three"] }));
  host = await startHost({
    bus,
    agents: [{ name: "echo", systemPrompt: "Echo.", tools: [], backend: model }],
  });
  server = await startUiServer({ bus, doors: [createAguiDoor()] });
  url = `${new URL(server.url).origin}/agui/echo`;
});

afterAll(async () => {
  await server?.close();
  await host?.close();
});

function sseIds(text: string): string[] {
  return [...text.matchAll(/^id: (.+)$/gm)].map((match) => match[1]!);
}

describe("the AG-UI door without JetStream", () => {
  it("runs a chat and replays the rest of it from the door's buffer after an event id", async () => {
    let streamed = Promise.resolve("");
    const recordingFetch: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const [forAgent, forTest] = response.body!.tee();
      streamed = new Response(forTest).text();
      return new Response(forAgent, { status: response.status, headers: response.headers });
    };
    const agent = new HttpAgent({ url, threadId: "mem", fetch: recordingFetch });
    agent.addMessage({ id: "u1", role: "user", content: "say it" });
    const events: BaseEvent[] = [];
    await agent.runAgent({ runId: "r1" }, { onEvent: ({ event }) => void events.push(event) });
    expect(events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, result: "one two three" });

    const body = JSON.stringify({
      threadId: "mem",
      runId: "r1",
      messages: [{ id: "u1", role: "user", content: "say it" }],
    });
    const all = sseIds(await streamed);
    expect(all).toHaveLength(events.length);
    // Reading again from an id gives the rest of the run, once, from the door's buffer.
    const fromMiddle = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "last-event-id": all[4]! },
      body,
    });
    expect(sseIds(await fromMiddle.text())).toEqual(all.slice(5));
  });
});

import type { Bus, BusMessage } from "../../src/bus/bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import type { AgentEvent, EventBody } from "../../src/events/types.js";
import { publishEvents } from "./ui-helpers.js";

/** A step of a scripted chat: publish these events, then (optionally) wait for the test. */
export interface ScriptStep {
  events: Array<{ body: EventBody; iteration?: number }>;
  /** Resolved by the test when it has checked what this step showed. */
  gate?: Promise<void>;
}

export interface ScriptedAgent {
  /** Control requests received, in order. */
  controls: unknown[];
  /** Chat requests received, in order. */
  chats: Array<{ session: string; text: string }>;
  stop(): void;
}

/**
 * A fake agent on the bus contract: answers `<prefix>.agents.<agent>.chat` by publishing a
 * scripted, realistic event sequence for the requesting session (pausing at each step's gate so
 * the test can look at the page mid-stream), then replying with the last ChatCompleted's result.
 * Control requests are recorded and answered `{ ok: true }`.
 */
export function startScriptedAgent(
  bus: Bus,
  options: { prefix: string; agent: string; script: (text: string) => ScriptStep[] },
): ScriptedAgent {
  const { prefix, agent } = options;
  const controls: unknown[] = [];
  const chats: Array<{ session: string; text: string }> = [];
  let seq = 0;
  let chatCount = 0;
  let clock = Date.UTC(2025, 0, 1, 12, 0, 0);

  const chat = bus.subscribe(chatSubject(prefix, agent), (message: BusMessage) => {
    const request = JSON.parse(message.data) as { session: string; text: string };
    chats.push(request);
    const chatId = `chat-${++chatCount}`;
    const make = (body: EventBody, iteration = 0): AgentEvent => {
      clock += 100;
      return {
        agent,
        session: request.session,
        chatId,
        seq: ++seq,
        ts: new Date(clock).toISOString(),
        iteration,
        ...body,
      } as AgentEvent;
    };
    void (async () => {
      let last: AgentEvent | undefined;
      for (const step of options.script(request.text)) {
        const events = step.events.map((event) => make(event.body, event.iteration));
        publishEvents(bus, prefix, events);
        last = events[events.length - 1] ?? last;
        await bus.flush();
        await step.gate;
      }
      const reply =
        last?.kind === "ChatCompleted"
          ? { ok: true, session: request.session, result: last.result, usage: last.usage }
          : { ok: false, error: { code: "internal", message: "the script did not complete" } };
      bus.respond(message, JSON.stringify(reply));
    })();
  });

  const control = bus.subscribe(controlSubject(prefix, agent), (message: BusMessage) => {
    controls.push(JSON.parse(message.data));
    bus.respond(message, JSON.stringify({ ok: true }));
  });

  return {
    controls,
    chats,
    stop() {
      chat.unsubscribe();
      control.unsubscribe();
    },
  };
}

/** A resolvable promise: `open()` lets the scripted agent go on. */
export function createGate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

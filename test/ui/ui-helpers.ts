import type { Bus } from "../../src/bus/bus.js";
import { eventSubject } from "../../src/bus/subjects.js";
import type { AgentEvent, EventBody } from "../../src/events/types.js";

/** Builds events for one session with increasing `seq` and a fixed clock. */
export function createEventFactory(agent: string, session: string, chatId = "chat-1") {
  let seq = 0;
  let clock = Date.UTC(2025, 0, 1, 12, 0, 0);
  return (body: EventBody, iteration = 0): AgentEvent => {
    seq += 1;
    clock += 250;
    return {
      agent,
      session,
      chatId,
      seq,
      ts: new Date(clock).toISOString(),
      iteration,
      ...body,
    } as AgentEvent;
  };
}

/** Publishes events on their contract subjects, as the hosts do. */
export function publishEvents(bus: Bus, prefix: string, events: readonly AgentEvent[]): void {
  for (const event of events) {
    bus.publish(eventSubject(prefix, event.agent, event.session, event.kind), JSON.stringify(event));
  }
}

/** Reads Server-Sent Events from a fetch response body, one parsed `data:` payload at a time. */
export class SseReader {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  /** Comment lines seen (keep-alives). */
  readonly comments: string[] = [];

  constructor(response: Response) {
    if (!response.body) throw new Error("the SSE response has no body");
    this.reader = response.body.getReader();
  }

  /** The next `data:` message, parsed as JSON. */
  async next(): Promise<unknown> {
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const data: string[] = [];
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) this.comments.push(line.slice(1).trim());
          else if (line.startsWith("data: ")) data.push(line.slice(6));
        }
        if (data.length > 0) return JSON.parse(data.join("\n"));
        continue;
      }
      const chunk = await this.reader.read();
      if (chunk.done) throw new Error("the SSE stream ended");
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }

  /** Reads until a keep-alive comment arrives. */
  async nextComment(text: string): Promise<void> {
    while (!this.comments.includes(text)) {
      const chunk = await this.reader.read();
      if (chunk.done) throw new Error("the SSE stream ended");
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
      for (const match of this.buffer.matchAll(/^:(.*)$/gm)) this.comments.push(match[1]!.trim());
    }
  }

  async cancel(): Promise<void> {
    await this.reader.cancel().catch(() => undefined);
  }
}

import type { Bus } from "../../src/bus/bus.js";
import { createBusEventPublisher } from "../../src/bus/event-publisher.js";
import { eventSubject } from "../../src/bus/subjects.js";
import { createEventEmitter } from "../../src/events/event-emitter.js";
import type { AgentEvent } from "../../src/events/types.js";
import { nowMs, nowUs, yieldToEventLoop } from "../support/clock.js";
import type { RemoteSubscriber } from "../support/remote-subscriber.js";
import { percentile } from "../support/stats.js";

/** Events published between two turns of the event loop in the throughput runs. */
const CHUNK = 1_000;
/** How long the bench waits for a subscriber to catch up before calling the run broken. */
const CATCH_UP_TIMEOUT_MS = 30_000;

const DELTAS = Array.from({ length: 20 }, (_, index) => `word${index} `);

/** A subscriber's tally: counts what it consumed and wakes whoever waits for a total. */
export class ReceiveCounter {
  count = 0;
  #target = Number.POSITIVE_INFINITY;
  #resolve: (() => void) | undefined;

  /** The subscription handler. */
  readonly onMessage = (): void => {
    this.count++;
    if (this.count >= this.#target && this.#resolve) {
      const resolve = this.#resolve;
      this.#resolve = undefined;
      resolve();
    }
  };

  /** Resolves once `target` messages were consumed; rejects after the catch-up timeout. */
  until(target: number): Promise<void> {
    if (this.count >= target) return Promise.resolve();
    this.#target = target;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#resolve = undefined;
        reject(
          new Error(
            `the subscriber got ${this.count} of ${target} messages within ${CATCH_UP_TIMEOUT_MS} ms`,
          ),
        );
      }, CATCH_UP_TIMEOUT_MS);
      this.#resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/**
 * agentloop's path for a text delta: the session's event emitter (stamping agent, session, chat,
 * seq, ts) → `createBusEventPublisher` (subject + JSON) → `bus.publish`. Returns one publish step.
 */
export function agentloopDeltaSource(bus: Bus, session: string): (index: number) => void {
  const emitter = createEventEmitter({ agent: "bench", session, listeners: [createBusEventPublisher(bus)] });
  emitter.chatId = "bench-chat";
  return (index) => emitter.emit(1, { kind: "ModelTextDelta", delta: DELTAS[index % DELTAS.length]! });
}

/** The subjects and JSON payloads agentloop's path produces, captured once for the raw publisher. */
export function capturedDeltaPayloads(count: number): { subjects: string[]; payloads: string[] } {
  const subjects: string[] = [];
  const payloads: string[] = [];
  const capture = (event: AgentEvent) => {
    subjects.push(eventSubject("agentloop", event.agent, event.session, event.kind));
    payloads.push(JSON.stringify(event));
  };
  const emitter = createEventEmitter({ agent: "bench", session: "raw", listeners: [capture] });
  emitter.chatId = "bench-chat";
  for (let index = 0; index < count; index++) {
    emitter.emit(1, { kind: "ModelTextDelta", delta: DELTAS[index % DELTAS.length]! });
  }
  return { subjects, payloads };
}

/**
 * Events per second from the first publish until `settled` resolves (the bus flushed, or the
 * subscriber consumed the last): `total` publishes in chunks, the event loop turning between
 * chunks so the client writes (and an in-process subscriber reads) while the publisher goes on.
 */
export async function publishThroughput(
  publishOne: (index: number) => void,
  settled: () => Promise<unknown>,
  total: number,
): Promise<number> {
  const start = nowMs();
  for (let index = 0; index < total; index++) {
    publishOne(index);
    if ((index + 1) % CHUNK === 0) await yieldToEventLoop();
  }
  await settled();
  return total / ((nowMs() - start) / 1000);
}

/** Pairs the send stamps of text deltas with their arrival at a subscriber. */
export interface LatencyProbe {
  /** Resolves once every delta sent so far has arrived. */
  caughtUp(): Promise<void>;
  /** p50 and p99 of arrival − send (µs) since the last call. */
  takePercentiles(): Promise<{ p50: number; p99: number }>;
}

function latencyPercentiles(
  sent: readonly number[],
  received: readonly number[],
): { p50: number; p99: number } {
  if (received.length !== sent.length) {
    throw new Error(`${sent.length} deltas sent but ${received.length} received`);
  }
  const latencies = sent.map((stamp, index) => received[index]! - stamp).sort((a, b) => a - b);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** Stamps for a subscriber in another process (hrtime is CLOCK_MONOTONIC, shared on one machine). */
export class RemoteDeltaStamps implements LatencyProbe {
  sent: number[] = [];
  #sentBefore = 0;

  constructor(private readonly subscriber: RemoteSubscriber) {}

  /** Pass as the backend's `onDelta`. */
  readonly onSent = (): void => {
    this.sent.push(nowUs());
  };

  /** Starts stamping; deltas the subscriber consumed before (e.g. throughput runs) are not paired. */
  async begin(): Promise<void> {
    const { deltaCount } = await this.subscriber.until("deltas", 0);
    this.#sentBefore = deltaCount;
    this.subscriber.stamp(true);
  }

  async caughtUp(): Promise<void> {
    await this.subscriber.until("deltas", this.#sentBefore + this.sent.length);
  }

  async takePercentiles(): Promise<{ p50: number; p99: number }> {
    const received = await this.subscriber.takeStamps();
    const result = latencyPercentiles(this.sent, received);
    this.#sentBefore += this.sent.length;
    this.sent = [];
    return result;
  }
}

/** Send and receive stamps of text deltas for a subscriber in this process. */
export class DeltaStamps implements LatencyProbe {
  sent: number[] = [];
  received: number[] = [];
  #waiter: { count: number; resolve: () => void } | undefined;

  /** Pass as the backend's `onDelta`. */
  readonly onSent = (): void => {
    this.sent.push(nowUs());
  };

  /** Call from the subscriber's handler for each text delta. */
  readonly onReceived = (): void => {
    this.received.push(nowUs());
    if (this.#waiter && this.received.length >= this.#waiter.count) {
      const { resolve } = this.#waiter;
      this.#waiter = undefined;
      resolve();
    }
  };

  caughtUp(): Promise<void> {
    const count = this.sent.length;
    if (this.received.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the subscriber got ${this.received.length} of ${count} deltas`)),
        CATCH_UP_TIMEOUT_MS,
      );
      this.#waiter = {
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
    });
  }

  async takePercentiles(): Promise<{ p50: number; p99: number }> {
    const result = latencyPercentiles(this.sent, this.received);
    this.sent = [];
    this.received = [];
    return result;
  }
}

import { randomUUID } from "node:crypto";
import type { Bus, BusMessage, SubscribeOptions } from "../../src/bus/bus.js";

/** A subject root no other test (or test file sharing the server) uses. */
export function uniqueRoot(): string {
  return `t${randomUUID().replaceAll("-", "").slice(0, 12)}`;
}

/** Messages received so far, and a way to wait for the n-th. */
export interface Inbox {
  messages: BusMessage[];
  /** Resolves once `count` messages arrived; rejects (naming what is missing) after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<BusMessage[]>;
  unsubscribe(): void;
}

/** Subscribes and records every message. */
export function record(bus: Bus, pattern: string, options?: SubscribeOptions): Inbox {
  const messages: BusMessage[] = [];
  let waiters: { count: number; resolve: () => void }[] = [];
  const subscription = bus.subscribe(
    pattern,
    (message) => {
      messages.push(message);
      const ready = waiters.filter((waiter) => messages.length >= waiter.count);
      waiters = waiters.filter((waiter) => messages.length < waiter.count);
      for (const waiter of ready) waiter.resolve();
    },
    options,
  );
  return {
    messages,
    unsubscribe: () => subscription.unsubscribe(),
    waitFor(count, timeoutMs = 5_000) {
      if (messages.length >= count) return Promise.resolve(messages);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${pattern}: got ${messages.length} of ${count} messages`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(messages);
          },
        });
      });
    },
  };
}

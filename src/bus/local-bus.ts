import type { Bus, BusMessage, RequestOptions, SubscribeOptions, Subscription } from "./bus.js";
import { DEFAULT_REQUEST_TIMEOUT_MS, type HandlerErrorReporter, reportHandlerError } from "./bus-defaults.js";
import { BusClosedError, BusTimeoutError, InvalidSubjectError, NoRespondersError } from "./bus-errors.js";
import { isOverMaxPayload } from "./payload-size.js";
import { isValidPattern, isValidSubject, tokensMatch } from "./subjects.js";

/** Options of the in-process bus. */
export interface LocalBusOptions {
  /** Called when a handler throws; delivery to everyone else goes on. @defaultValue one line on stderr */
  onHandlerError?: HandlerErrorReporter;
  /** Request timeout when the caller gives none. @defaultValue 30_000 */
  defaultRequestTimeoutMs?: number;
  /** Largest payload in UTF-8 bytes. @defaultValue no limit (delivery is in memory) */
  maxPayload?: number;
}

interface LocalSubscription {
  readonly tokens: readonly string[];
  readonly handler: (message: BusMessage) => void;
  readonly queue: string | undefined;
  isActive: boolean;
}

/** One queued hand-over: a message to a subscriber, or a flush waiting for its turn. */
type Delivery =
  | { subscription: LocalSubscription; message: BusMessage; flushed?: undefined }
  | { subscription?: undefined; message?: undefined; flushed: () => void };

let nextBusId = 0;

/**
 * The in-process bus: the same subjects, wildcards, request/reply and queue groups as NATS, for
 * `agentloop up` without a nats-server and for tests.
 *
 * Delivery is asynchronous (a handler never runs inside `publish`, so a publisher holding a lock or
 * iterating a structure is never re-entered) and in publish order: all deliveries go through one
 * FIFO drained on `setImmediate`, in batches, so a handler that keeps publishing cannot starve I/O.
 * Queue groups pick members round-robin. A throwing handler is reported and skipped.
 *
 * @example
 * ```ts
 * import { LocalBus } from "agentloop/bus";
 *
 * const bus = new LocalBus();
 * bus.subscribe("greet.*", (message) => {
 *   if (message.reply) bus.publish(message.reply, `hello, ${message.subject.slice("greet.".length)}`);
 * });
 * const reply = await bus.request("greet.ada", "", { timeoutMs: 1_000 });
 * console.log(reply.data); // "hello, ada"
 * await bus.close();
 * ```
 */
export class LocalBus implements Bus {
  readonly kind = "local" as const;
  readonly maxPayload: number;

  private readonly subscriptions: LocalSubscription[] = [];
  private readonly queueCursors = new Map<string, number>();
  private pending: (Delivery | undefined)[] = [];
  private head = 0;
  private isScheduled = false;
  private isClosed = false;
  private closing: Promise<void> | undefined;
  private readonly openRequests = new Set<(error: Error) => void>();
  private readonly inboxPrefix = `_INBOX.local${nextBusId++}.`;
  private nextInbox = 0;
  private readonly onHandlerError: HandlerErrorReporter;
  private readonly defaultRequestTimeoutMs: number;
  private droppedCount = 0;

  constructor(options: LocalBusOptions = {}) {
    this.onHandlerError = options.onHandlerError ?? reportHandlerError;
    this.defaultRequestTimeoutMs = options.defaultRequestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.maxPayload = options.maxPayload ?? Number.POSITIVE_INFINITY;
  }

  /** Publishes dropped because the bus was closed, the subject was invalid or the payload too large. */
  get droppedPublishes(): number {
    return this.droppedCount;
  }

  publish(subject: string, data: string, headers?: Record<string, string>): void {
    if (this.isClosed || !isValidSubject(subject) || isOverMaxPayload(data, this.maxPayload)) {
      this.droppedCount++;
      return;
    }
    this.dispatch(subject, data, headers === undefined ? undefined : { ...headers }, undefined);
  }

  subscribe(
    subject: string,
    handler: (message: BusMessage) => void,
    options: SubscribeOptions = {},
  ): Subscription {
    if (this.isClosed) throw new BusClosedError();
    if (!isValidPattern(subject)) throw new InvalidSubjectError(subject);
    const subscription: LocalSubscription = {
      tokens: subject.split("."),
      handler,
      queue: options.queue,
      isActive: true,
    };
    this.subscriptions.push(subscription);
    return { unsubscribe: () => this.remove(subscription) };
  }

  request(subject: string, data: string, options: RequestOptions = {}): Promise<BusMessage> {
    if (this.isClosed) return Promise.reject(new BusClosedError());
    if (!isValidSubject(subject)) return Promise.reject(new InvalidSubjectError(subject));
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const timeoutMs = options.timeoutMs ?? this.defaultRequestTimeoutMs;

    return new Promise<BusMessage>((resolve, reject) => {
      const inbox = this.inboxPrefix + this.nextInbox++;
      const settle = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.openRequests.delete(fail);
        replies.unsubscribe();
      };
      const fail = (error: Error): void => {
        settle();
        reject(error);
      };
      const onAbort = (): void => fail(signal?.reason);
      const replies = this.subscribe(inbox, (message) => {
        settle();
        resolve(message);
      });
      const timer = setTimeout(() => fail(new BusTimeoutError(subject, timeoutMs)), timeoutMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.openRequests.add(fail);
      const headers = options.headers === undefined ? undefined : { ...options.headers };
      if (this.dispatch(subject, data, headers, inbox) === 0) fail(new NoRespondersError(subject));
    });
  }

  respond(message: BusMessage, data: string): void {
    if (message.reply !== undefined) this.publish(message.reply, data);
  }

  flush(): Promise<void> {
    if (this.head === this.pending.length) return Promise.resolve();
    return new Promise((resolve) => this.enqueue({ flushed: resolve }));
  }

  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    this.isClosed = true;
    // Like a NATS drain: what was already published is still delivered.
    await this.flush();
    for (const subscription of this.subscriptions) subscription.isActive = false;
    this.subscriptions.length = 0;
    for (const fail of [...this.openRequests]) fail(new BusClosedError("the bus closed before a reply came"));
  }

  /** Queues the message for every matching subscriber; returns how many will get it. */
  private dispatch(
    subject: string,
    data: string,
    headers: Record<string, string> | undefined,
    reply: string | undefined,
  ): number {
    const tokens = subject.split(".");
    const message: BusMessage = { subject, data };
    if (reply !== undefined) message.reply = reply;
    if (headers !== undefined) message.headers = headers;
    let recipients = 0;
    let groups: Map<string, LocalSubscription[]> | undefined;
    for (const subscription of this.subscriptions) {
      if (!tokensMatch(subscription.tokens, tokens)) continue;
      if (subscription.queue === undefined) {
        this.enqueue({ subscription, message });
        recipients++;
      } else {
        groups ??= new Map();
        const members = groups.get(subscription.queue);
        if (members === undefined) groups.set(subscription.queue, [subscription]);
        else members.push(subscription);
      }
    }
    if (groups !== undefined) {
      for (const [queue, members] of groups) {
        const cursor = this.queueCursors.get(queue) ?? 0;
        this.queueCursors.set(queue, cursor + 1);
        this.enqueue({ subscription: members[cursor % members.length]!, message });
        recipients++;
      }
    }
    return recipients;
  }

  private enqueue(delivery: Delivery): void {
    this.pending.push(delivery);
    if (!this.isScheduled) {
      this.isScheduled = true;
      setImmediate(this.drain);
    }
  }

  private readonly drain = (): void => {
    this.isScheduled = false;
    // Only what was queued before this turn: deliveries queued by handlers wait for the next one.
    const end = this.pending.length;
    while (this.head < end) {
      const delivery = this.pending[this.head]!;
      this.pending[this.head++] = undefined;
      if (delivery.flushed !== undefined) delivery.flushed();
      else if (delivery.subscription.isActive) this.deliver(delivery.subscription, delivery.message);
    }
    if (this.head < this.pending.length) {
      this.pending = this.pending.slice(this.head);
      this.head = 0;
      this.isScheduled = true;
      setImmediate(this.drain);
    } else {
      this.pending.length = 0;
      this.head = 0;
    }
  };

  private deliver(subscription: LocalSubscription, message: BusMessage): void {
    try {
      subscription.handler(message);
    } catch (error) {
      try {
        this.onHandlerError(error, message);
      } catch {
        // The reporter itself failed: nothing sensible is left to tell.
      }
    }
  }

  private remove(subscription: LocalSubscription): void {
    if (!subscription.isActive) return;
    subscription.isActive = false;
    const index = this.subscriptions.indexOf(subscription);
    if (index !== -1) this.subscriptions.splice(index, 1);
  }
}

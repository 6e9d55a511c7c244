/**
 * The transport the host, the logger and the UI share. Two implementations with the same subject
 * semantics: NatsBus (a real nats-server) and LocalBus (in-process, the embedded default).
 * Payloads are bytes on the wire; these helpers carry UTF-8 JSON strings.
 */

/** A message received on a subscription. */
export interface BusMessage {
  subject: string;
  /** UTF-8 payload. */
  data: string;
  /** Set when the sender expects a reply (request/reply). */
  reply?: string;
  headers?: Record<string, string>;
  /**
   * Set when the payload cannot be read as sent (its bytes are not valid UTF-8): `data` is then a
   * lossy decoding, and a request is answered `bad_request` with this reason.
   */
  malformed?: string;
}

/** The reason a payload whose bytes are not valid UTF-8 is refused. */
export const NOT_UTF8 = "the payload is not valid UTF-8 (every payload of the contract is UTF-8 JSON)";

/** How to subscribe. */
export interface SubscribeOptions {
  /** Queue group: each message goes to one member of the group. */
  queue?: string;
}

/** A live subscription. */
export interface Subscription {
  unsubscribe(): void;
  /**
   * Stops the subscription without losing what the server already sent it: messages in flight
   * are still handled. Where absent, {@link unsubscribe} is all there is.
   */
  drain?(): Promise<void>;
}

/** How long a request waits for its reply, and what cancels it. */
export interface RequestOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Message headers sent with the request (e.g. an `ask_agent` child's lineage and trace parent). */
  headers?: Record<string, string>;
}

/** See {@link Bus.connectivity}. */
export interface Connectivity {
  isConnected: boolean;
  reconnectedAt: number;
}

/** The transport the host, the CLI and the UI share: NATS ({@link NatsBus}) or in-process ({@link LocalBus}). */
export interface Bus {
  /** "nats" or "local": shown to the user. */
  readonly kind: "nats" | "local";
  /**
   * Largest payload a publish may carry (UTF-8 bytes; Infinity without a limit). Larger ones are
   * dropped and counted, so publishers that can shorten their message check against it first.
   */
  readonly maxPayload: number;
  /**
   * Whether the bus reaches its server now, and when it last came back after losing it (ms since
   * the epoch; 0 if it never lost it). Unset on buses that cannot disconnect (in-process).
   */
  connectivity?(): Connectivity;
  /**
   * Publishes this bus dropped (invalid subject, oversized payload, closed, nothing left to hold
   * them in): a publisher that must account for its messages compares it before and after.
   */
  readonly droppedPublishes?: number;
  /** Fire-and-forget publish. Never throws for a delivery problem (best-effort). */
  publish(subject: string, data: string, headers?: Record<string, string>): void;
  /**
   * {@link publish} for a payload already encoded as UTF-8 (the event publisher writes its JSON as
   * bytes for a bus that has this). The bus may hold on to `data` until it is sent: the caller does
   * not write into it again.
   */
  publishBytes?(subject: string, data: Uint8Array): void;
  /** Subscribes with NATS wildcards (`*` one token, `>` the rest). */
  subscribe(
    subject: string,
    handler: (message: BusMessage) => void,
    options?: SubscribeOptions,
  ): Subscription;
  /** Request/reply: resolves with the first reply, rejects on timeout or when nobody listens. */
  request(subject: string, data: string, options?: RequestOptions): Promise<BusMessage>;
  /** Answers a message received with a `reply` subject. */
  respond(message: BusMessage, data: string): void;
  /** Waits until everything published so far has been handed to the transport. */
  flush(): Promise<void>;
  /** Drains subscriptions and closes. */
  close(): Promise<void>;
}

/** One publish or reply kept while the NATS connection is down. */
export interface HeldMessage {
  subject: string;
  data: string;
  headers?: Record<string, string>;
  /** A reply to a request: a client is waiting for it. */
  isReply: boolean;
  /** UTF-8 size of `data`, counted against the byte bound. */
  bytes: number;
}

/**
 * The FIFO a NatsBus fills while disconnected, bounded by a message count and a byte total. Events
 * beyond a bound are refused (and counted in `dropped`); replies are always kept, since each one
 * stands for a client waiting, and there are only as many as there are requests in flight.
 */
export class HeldMessages {
  readonly maxMessages: number;
  readonly maxBytes: number;
  /** Events refused since the last `takeAll`. */
  dropped = 0;
  private messages: HeldMessage[] = [];
  private byteTotal = 0;

  constructor(maxMessages: number, maxBytes: number) {
    this.maxMessages = maxMessages;
    this.maxBytes = maxBytes;
  }

  /** Messages held now. */
  get size(): number {
    return this.messages.length;
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.byteTotal;
  }

  /** Appends `message`; false (and counted) when it is an event that would break a bound. */
  add(message: HeldMessage): boolean {
    const isFull =
      this.messages.length + 1 > this.maxMessages || this.byteTotal + message.bytes > this.maxBytes;
    if (isFull && !message.isReply) {
      this.dropped++;
      return false;
    }
    this.messages.push(message);
    this.byteTotal += message.bytes;
    return true;
  }

  /** Everything held, oldest first; the buffer starts over empty. */
  takeAll(): HeldMessage[] {
    const messages = this.messages;
    this.messages = [];
    this.byteTotal = 0;
    this.dropped = 0;
    return messages;
  }
}

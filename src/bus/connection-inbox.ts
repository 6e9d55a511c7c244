import { createInbox, type NatsConnection } from "@nats-io/transport-node";

/**
 * A fresh reply inbox on the connection's own inbox prefix (`inboxPrefix`, default `_INBOX`), for
 * subscriptions made by hand (Agent Protocol prompts, discovery, approval queries). A bare
 * `createInbox()` would always use `_INBOX`, which a NATS user restricted to its own prefix may
 * not subscribe to. The prefix is read from the connection's `options`, a public field of the
 * client's connection class that nats.js's JetStream reads the same way (the `NatsConnection`
 * interface does not declare it).
 */
export function createConnectionInbox(connection: NatsConnection): string {
  return createInbox(inboxPrefixOf(connection));
}

/** The connection's inbox prefix; undefined means the client's default (`_INBOX`). */
export function inboxPrefixOf(connection: NatsConnection): string | undefined {
  const options = (connection as { options?: { inboxPrefix?: unknown } }).options;
  const prefix = options?.inboxPrefix;
  return typeof prefix === "string" && prefix !== "" ? prefix : undefined;
}

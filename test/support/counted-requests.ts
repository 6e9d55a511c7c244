import type { NatsConnection } from "@nats-io/transport-node";

/**
 * Counts the requests sent on `connection` from now on (JetStream message gets, publishes with an
 * acknowledgement, KV reads and writes): how many round trips a step costs. Returns the count so far.
 */
export function countRequests(connection: NatsConnection): () => number {
  let requests = 0;
  const request = connection.request.bind(connection);
  connection.request = (...args: Parameters<typeof connection.request>) => {
    requests++;
    return request(...args);
  };
  return () => requests;
}

import { headers as createHeaders, errors, type NatsConnection } from "@nats-io/transport-node";
import type { BusMessage } from "../bus/bus.js";

/**
 * What an empty request on `subject` finds: an answer (a live host answers it `bad_request` at
 * once), `nobody` (no responders: nothing subscribes), or `silent` (something subscribes but did
 * not answer within `timeoutMs`: a host paused, cut off or too busy to answer yet).
 */
export async function probe(
  connection: NatsConnection,
  subject: string,
  timeoutMs: number,
): Promise<"answered" | "nobody" | "silent"> {
  try {
    await connection.request(subject, "{}", { timeout: timeoutMs });
    return "answered";
  } catch (error) {
    const isNobody =
      error instanceof errors.NoRespondersError ||
      (error instanceof errors.RequestError && error.isNoResponders());
    return isNobody ? "nobody" : "silent";
  }
}

/** Whether something answers on `subject` within `timeoutMs` (see {@link probe}): silence counts as nobody. */
export async function answersProbe(
  connection: NatsConnection,
  subject: string,
  timeoutMs: number,
): Promise<boolean> {
  return (await probe(connection, subject, timeoutMs)) === "answered";
}

/**
 * Publishes a request received here to `subject` with the requester's reply subject, so whoever
 * takes it there answers the requester directly, with `headers` (none when not given).
 */
export function passOnRequest(
  connection: NatsConnection,
  subject: string,
  message: BusMessage,
  headers?: Record<string, string>,
): void {
  let natsHeaders: ReturnType<typeof createHeaders> | undefined;
  if (headers !== undefined) {
    natsHeaders = createHeaders();
    for (const [key, value] of Object.entries(headers)) natsHeaders.set(key, value);
  }
  connection.publish(subject, message.data, {
    ...(natsHeaders === undefined ? {} : { headers: natsHeaders }),
    ...(message.reply === undefined ? {} : { reply: message.reply }),
  });
}

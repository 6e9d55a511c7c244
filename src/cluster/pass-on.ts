import { headers as createHeaders, type NatsConnection } from "@nats-io/transport-node";
import type { BusMessage } from "../bus/bus.js";

/**
 * Whether something answers on `subject`: an empty request, which a live host answers
 * `bad_request` at once. No responders, or silence past `timeoutMs`, count as nobody.
 */
export async function answersProbe(
  connection: NatsConnection,
  subject: string,
  timeoutMs: number,
): Promise<boolean> {
  try {
    await connection.request(subject, "{}", { timeout: timeoutMs });
    return true;
  } catch {
    return false;
  }
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

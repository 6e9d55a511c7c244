import { isUtf8 } from "node:buffer";
import { type BusMessage, NOT_UTF8 } from "./bus.js";
import { MAX_PAYLOAD_BYTES } from "./contract.js";

/**
 * A message as the NATS client hands it over, whatever the door: a plain subscription's `Msg`,
 * a `$SRV` endpoint's `ServiceMsg`, an Agent Protocol prompt. Only what every one of them has.
 */
export interface InboundMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly reply?: string | undefined;
  readonly headers?: { keys(): string[]; get(key: string): string } | undefined;
}

/**
 * The one place bytes received from NATS become a {@link BusMessage}. Every door a request can
 * come through (the `$SRV` endpoints, a plain subscription, a request forwarded between hosts, the
 * Agent Protocol) goes through here, so the checks cannot differ from one door to another:
 *
 * - bytes that are not valid UTF-8 set `malformed` (decoding would replace them with U+FFFD, and a
 *   request would run on text nobody sent);
 * - with `maxBytes` (a request door passes {@link MAX_PAYLOAD_BYTES}), a larger payload sets
 *   `malformed` without being decoded (a server configured with a larger `max_payload` must not
 *   hand the host more than the contract accepts);
 * - headers are copied with their keys as sent (the v3 client's lookups are case-sensitive).
 *
 * JSON and the fields themselves are read by the contract's parsers (src/bus/contract.ts), which
 * know what a chat or a control request must hold.
 */
export function toBusMessage(inbound: InboundMessage, options: { maxBytes?: number } = {}): BusMessage {
  const bytes = inbound.data;
  const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
  const message: BusMessage = { subject: inbound.subject, data: "" };
  if (bytes.byteLength > maxBytes) {
    message.malformed = `the payload is ${bytes.byteLength} bytes, over the ${maxBytes}-byte limit of a request`;
  } else {
    message.data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
    if (!isUtf8(bytes)) message.malformed = NOT_UTF8;
  }
  if (inbound.reply) message.reply = inbound.reply;
  const headers = inbound.headers;
  if (headers !== undefined) {
    const record: Record<string, string> = {};
    for (const key of headers.keys()) record[key] = headers.get(key);
    message.headers = record;
  }
  return message;
}

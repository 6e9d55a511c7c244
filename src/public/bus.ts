/**
 * `agentloop/bus`: the transport and the NATS contract, for a service that talks to agentloop
 * hosts without running agents itself (a client, a gateway, an approver).
 *
 * - {@link Bus}, with two implementations: {@link NatsBus} (other processes) and {@link LocalBus}
 *   (this process only, the same subjects).
 * - The subjects ({@link chatSubject}, {@link controlSubject}, the event patterns) and the
 *   contract's schemas: requests and replies are checked with them (`ChatReply.parse(…)`).
 * - The bus's errors (also in `agentloop/errors`).
 *
 * @example
 * ```ts
 * import { ChatReply, chatSubject, DEFAULT_PREFIX, NatsBus } from "agentloop/bus";
 *
 * const bus = await NatsBus.connect({ url: "nats://127.0.0.1:4222" });
 * const message = await bus.request(
 *   chatSubject(DEFAULT_PREFIX, "assistant"),
 *   JSON.stringify({ session: "s1", text: "hello" }),
 *   { timeoutMs: 60_000 },
 * );
 * const reply = ChatReply.parse(JSON.parse(message.data));
 * console.log(reply.ok ? reply.result : `${reply.error.code}: ${reply.error.message}`);
 * await bus.close();
 * ```
 *
 * @packageDocumentation
 */

export type { Bus, BusMessage, RequestOptions, SubscribeOptions, Subscription } from "../bus/bus.js";
export {
  BusClosedError,
  BusConfigError,
  BusError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "../bus/bus-errors.js";
export {
  ChatReply,
  ChatRequest,
  CONTROL_COMMANDS,
  ControlReply,
  ControlRequest,
  ERROR_CODES,
  ErrorCode,
  MAX_PAYLOAD_BYTES,
  ReplyError,
  ReplyUsage,
} from "../bus/contract.js";
export { LocalBus, type LocalBusOptions } from "../bus/local-bus.js";
export { NatsBus, type NatsBusOptions } from "../bus/nats-bus.js";
export { NatsPermissionError, PermissionDeniedError } from "../bus/nats-permission-error.js";
export {
  allEventsPattern,
  chatSubject,
  controlSubject,
  DEFAULT_PREFIX,
  eventSubject,
  NAME_PATTERN,
  sessionEventsPattern,
} from "../bus/subjects.js";

import type { NatsConnection } from "@nats-io/transport-node";
import type { BusMessage } from "../bus/bus.js";
import type { RequestVerb } from "../bus/subjects.js";
import { passOnRequest, probe } from "./pass-on.js";

/** How long the probe for a host serving an agent may take before "none" is assumed. */
const PROBE_TIMEOUT_MS = 2_000;

/** `<prefix>.serving.<agent>.<verb>`: where the hosts that serve `agent` take requests passed on. */
export function servingSubject(prefix: string, agent: string, verb: RequestVerb | "*"): string {
  return `${prefix}.serving.${agent}.${verb}`;
}

/**
 * Hosts on one NATS system may serve different agents, yet all of them share the queue group on
 * `<prefix>.agents.*.chat|control`, so a request can land on a host that does not serve its agent.
 * That host passes it on to `<prefix>.serving.<agent>.<verb>`, which only the hosts serving the
 * agent take (in their queue group), with the requester's reply subject: the serving host answers
 * the requester itself. When no host serves the agent, the caller answers `unknown_agent`.
 */
export class AgentRouting {
  readonly #connection: NatsConnection;
  readonly #prefix: string;

  constructor(connection: NatsConnection, prefix: string) {
    this.#connection = connection;
    this.#prefix = prefix;
  }

  /** What a host subscribes to (in its queue group) for an agent it serves. */
  patternFor(agent: string): string {
    return servingSubject(this.#prefix, agent, "*");
  }

  /** A passed-on request as if it had come on `<prefix>.agents.<agent>.<verb>`. */
  asAgentRequest(message: BusMessage): BusMessage {
    const head = `${this.#prefix}.serving.`;
    return { ...message, subject: `${this.#prefix}.agents.${message.subject.slice(head.length)}` };
  }

  /**
   * Passes the request on to a host serving `agent`, unless a probe (an empty request) finds no
   * responders there: then no host serves it, and the caller answers `unknown_agent`. A probe left
   * unanswered still found a subscriber (a host too busy to answer at once): the request goes on.
   */
  async passOn(agent: string, verb: RequestVerb, message: BusMessage): Promise<boolean> {
    const subject = servingSubject(this.#prefix, agent, verb);
    if ((await probe(this.#connection, subject, PROBE_TIMEOUT_MS)) === "nobody") return false;
    passOnRequest(this.#connection, subject, message, message.headers);
    return true;
  }
}

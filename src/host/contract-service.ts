import type { Service } from "@nats-io/services";
import type { NatsConnection } from "@nats-io/transport-node";
import type { BusMessage } from "../bus/bus.js";
import { addCountedEndpoint, servicesOn } from "../bus/counted-endpoint.js";
import { AGENTLOOP_VERSION } from "../version.js";
import type { RequestListener } from "./agent-host.js";

/** The `$SRV` service name of our own contract. */
export const CONTRACT_SERVICE_NAME = "agentloop";

/**
 * Our own contract (`<prefix>.agents.*.chat|control`, SPEC §11) registered as a NATS micro service
 * named `agentloop`, so `$SRV.INFO` / `$SRV.STATS` / `$SRV.PING` show its endpoints, request counts,
 * errors (replies with `ok: false`) and processing time. The replies are unchanged: the same JSON,
 * no headers, in the same queue group, so existing clients see no difference.
 */
export class ContractService {
  readonly service: Service;

  private constructor(service: Service) {
    this.service = service;
  }

  static async start(connection: NatsConnection, options: { prefix: string }): Promise<ContractService> {
    const service = await servicesOn(connection).add({
      name: CONTRACT_SERVICE_NAME,
      version: AGENTLOOP_VERSION,
      description: "agentloop agent host: chat and control for every agent it serves",
      metadata: { prefix: options.prefix },
    });
    return new ContractService(service);
  }

  /** The host's {@link RequestListener}: one endpoint per verb; unsubscribing stops the service. */
  readonly listen: RequestListener = (verb, subject, queue, handle) => {
    addCountedEndpoint(this.service, verb, {
      subject,
      queue,
      handle: async (message) => {
        const busMessage: BusMessage = { subject: message.subject, data: message.string() };
        if (message.reply) busMessage.reply = message.reply;
        const reply = await handle(busMessage);
        return reply.ok
          ? { isError: false }
          : { isError: true, reason: `${reply.error.code}: ${reply.error.message}` };
      },
    });
    return { unsubscribe: () => void this.stop() };
  };

  /** Stops answering (idempotent). */
  async stop(): Promise<void> {
    if (!this.service.isStopped) await this.service.stop();
  }
}

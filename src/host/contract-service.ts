import type { Service } from "@nats-io/services";
import type { BusMessage, Subscription } from "../bus/bus.js";
import { MAX_PAYLOAD_BYTES } from "../bus/contract.js";
import { addCountedEndpoint, EndpointCounts, servicesOn } from "../bus/counted-endpoint.js";
import { toBusMessage } from "../bus/inbound-message.js";
import type { NatsBus } from "../bus/nats-bus.js";
import { describeError } from "../errors/describe-error.js";
import { VERSION } from "../version.js";
import type { RequestListener } from "./agent-host.js";

/** The `$SRV` service name of our own contract. */
export const CONTRACT_SERVICE_NAME = "agentloop";

interface Listening {
  subject: string;
  queue: string;
  handle: (message: BusMessage) => Promise<unknown>;
  /** Set once the service failed and the endpoint moved to a plain subscription. */
  fallback?: Subscription;
}

/**
 * Our own contract (`<prefix>.agents.*.chat|control`) registered as a NATS micro service
 * named `agentloop`, so `$SRV.INFO` / `$SRV.STATS` / `$SRV.PING` show its endpoints, request counts,
 * errors (replies with `ok: false`) and processing time. The replies are unchanged: the same JSON,
 * no headers, in the same queue group, so existing clients see no difference.
 *
 * The service is an extra: if it ever stops on an error (the library stops a whole service when one
 * of its subscriptions fails), the endpoints go on as plain subscriptions and one line says so.
 */
export class ContractService {
  readonly service: Service;
  readonly #bus: NatsBus;
  readonly #log: (line: string) => void;
  readonly #counts: EndpointCounts;
  readonly #listening: Listening[] = [];
  #stopping: Promise<void> | undefined;

  private constructor(service: Service, counts: EndpointCounts, bus: NatsBus, log: (line: string) => void) {
    this.service = service;
    this.#counts = counts;
    this.#bus = bus;
    this.#log = log;
    void service.stopped.then((error) => {
      // A closed connection stops the service too: that is a shutdown, not a failure to fall back from.
      if (error !== null && this.#stopping === undefined && !this.#isBusClosing()) this.#fallBack(error);
    });
  }

  /**
   * @param options.statsData host-wide counters shown in each endpoint's `data` in `$SRV.STATS`
   *   (e.g. `{ eventPublishFailures, permissionErrors }`), next to `replies` (see {@link EndpointCounts}).
   */
  static async start(
    bus: NatsBus,
    options: {
      prefix: string;
      hostId?: string;
      log?: (line: string) => void;
      statsData?: () => Record<string, unknown>;
    },
  ): Promise<ContractService> {
    const { statsData } = options;
    const counts = new EndpointCounts();
    const service = await servicesOn(bus.connection).add({
      name: CONTRACT_SERVICE_NAME,
      version: VERSION,
      description: "agentloop agent host: chat and control for every agent it serves",
      metadata: { prefix: options.prefix, ...(options.hostId === undefined ? {} : { host: options.hostId }) },
      statsHandler: counts.statsHandler(statsData),
    });
    return new ContractService(service, counts, bus, options.log ?? (() => {}));
  }

  /** The host's {@link RequestListener}: one endpoint per verb; unsubscribing stops the service. */
  readonly listen: RequestListener = (verb, subject, queue, handle) => {
    const listening: Listening = { subject, queue, handle };
    this.#listening.push(listening);
    addCountedEndpoint(this.service, this.#counts, verb, {
      subject,
      queue,
      handle: async (message) => {
        const reply = await handle(toBusMessage(message, { maxBytes: MAX_PAYLOAD_BYTES }));
        return reply.ok
          ? { isError: false }
          : { isError: true, reason: `${reply.error.code}: ${reply.error.message}` };
      },
    });
    return {
      unsubscribe: () => {
        listening.fallback?.unsubscribe();
        this.stop().catch((error: unknown) => {
          this.#log(`could not stop the ${CONTRACT_SERVICE_NAME} micro service: ${describeError(error)}`);
        });
      },
    };
  };

  /**
   * Stops answering. Idempotent, and quiet when the bus was closed first (a shutdown may close the
   * connection before the host unsubscribes): a closed connection answers nothing anyway.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const listening of this.#listening) listening.fallback?.unsubscribe();
      if (this.service.isStopped || this.#isBusClosing()) return;
      try {
        await this.service.stop();
      } catch (error) {
        // Closed while stopping: nothing is left to stop.
        if (!this.#isBusClosing()) throw error;
      }
    })();
    return this.#stopping;
  }

  /** The bus is closed or closing (draining): nothing can be subscribed or stopped on it any more. */
  #isBusClosing(): boolean {
    return this.#bus.connection.isClosed() || this.#bus.connection.isDraining();
  }

  #fallBack(error: Error): void {
    this.#log(
      `the ${CONTRACT_SERVICE_NAME} micro service stopped (${error.message}); chat and control go on as plain subscriptions, without $SRV stats`,
    );
    for (const listening of this.#listening) {
      listening.fallback = this.#bus.subscribe(
        listening.subject,
        (message) => void listening.handle(message),
        {
          queue: listening.queue,
        },
      );
    }
  }
}

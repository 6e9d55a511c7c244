import type { Bus, BusMessage, Subscription } from "../bus/bus.js";
import { type ChatReply, type ControlReply, errorReply } from "../bus/contract.js";
import { type RequestVerb, tenantOf, tenantRequestsPattern } from "../bus/subjects.js";
import type { AgentHost, RequestListener } from "./agent-host.js";
import { describeFailure } from "./describe-failure.js";

/** What serves one tenant: its own host (sessions, leases, replies, journal) under its own prefix. */
export interface TenantUnit {
  readonly host: AgentHost;
  /** Lets running chats finish (see {@link AgentHost.close}) and releases what the unit holds. */
  close(options?: { hurry?: AbortSignal }): Promise<void>;
}

/** Builds the unit of `tenant` whose host takes its requests through `listen` (it subscribes to nothing itself). */
export type TenantUnitFactory = (tenant: string, listen: RequestListener) => Promise<TenantUnit>;

export interface TenantHostsOptions {
  bus: Bus;
  prefix: string;
  /** Queue group shared by every host (as the untenanted subjects). */
  queueGroup: string;
  /** How requests arrive (the `$SRV` endpoints on NATS); default plain subscriptions. */
  listen?: RequestListener;
  createUnit: TenantUnitFactory;
  log: (line: string) => void;
}

type Handler = (message: BusMessage) => Promise<ChatReply | ControlReply>;

/**
 * Serves every tenant that sends a request, without a list of them: one subscription per verb
 * takes `<prefix>.tenant.*.agents.*.<verb>` (what a tenant's account maps its ordinary
 * `<prefix>.agents.<agent>.<verb>` to), reads the tenant from its token, and hands the request to
 * that tenant's unit, built on its first request. A unit lives under `<prefix>.tenant.<tenant>`, so
 * its sessions, histories, journal, stored replies, leases and events are apart from every other
 * tenant's and from the untenanted host's.
 */
export class TenantHosts {
  readonly #options: TenantHostsOptions;
  readonly #units = new Map<string, Promise<{ unit: TenantUnit; handlers: Map<string, Handler> }>>();
  #subscriptions: Subscription[] = [];
  #isClosed = false;

  constructor(options: TenantHostsOptions) {
    this.#options = options;
  }

  /** Subscribes to every tenant's requests. */
  start(): this {
    const { bus, prefix, queueGroup } = this.#options;
    const listen: RequestListener =
      this.#options.listen ??
      ((_name, subject, queue, handle) =>
        bus.subscribe(subject, (message) => void handle(message), { queue }));
    const verbs: RequestVerb[] = ["chat", "control"];
    this.#subscriptions = verbs.map((verb) =>
      listen(`tenant_${verb}`, tenantRequestsPattern(prefix, verb), queueGroup, (message) =>
        this.#handle(verb, message),
      ),
    );
    return this;
  }

  /** The tenants served here so far. */
  get tenants(): string[] {
    return [...this.#units.keys()];
  }

  /** The host of `tenant`, once a request of it arrived here. */
  async hostOf(tenant: string): Promise<AgentHost | undefined> {
    return (await this.#units.get(tenant))?.unit.host;
  }

  /** Stops taking requests, then closes every unit (their running chats finish as the host's do). */
  async close(options: { hurry?: AbortSignal } = {}): Promise<void> {
    this.#isClosed = true;
    for (const subscription of this.#subscriptions) subscription.unsubscribe();
    this.#subscriptions = [];
    const units = await Promise.allSettled([...this.#units.values()]);
    await Promise.allSettled(
      units.flatMap((settled) => (settled.status === "fulfilled" ? [settled.value.unit.close(options)] : [])),
    );
  }

  async #handle(verb: RequestVerb, message: BusMessage): Promise<ChatReply | ControlReply> {
    const tenant = tenantOf(this.#options.prefix, message.subject);
    if (tenant === undefined || tenant.invalid !== undefined) {
      return this.#reply(message, errorReply("bad_request", tenant?.invalid ?? "no tenant in the subject"));
    }
    if (this.#isClosed) return this.#reply(message, errorReply("cancelled", "the host is closing"));
    let handlers: Map<string, Handler>;
    try {
      handlers = (await this.#unitOf(tenant.tenant)).handlers;
    } catch (error) {
      const reason = describeFailure(error).message;
      this.#options.log(`could not start serving tenant ${tenant.tenant}: ${reason}`);
      return this.#reply(
        message,
        errorReply("internal", `cannot serve tenant "${tenant.tenant}": ${reason}`),
      );
    }
    const handle = handlers.get(verb);
    if (handle === undefined) return this.#reply(message, errorReply("cancelled", "the host is closing"));
    return handle(message);
  }

  #unitOf(tenant: string): Promise<{ unit: TenantUnit; handlers: Map<string, Handler> }> {
    let unit = this.#units.get(tenant);
    if (unit === undefined) {
      const handlers = new Map<string, Handler>();
      const listen: RequestListener = (name, _subject, _queue, handle) => {
        handlers.set(name, handle);
        return { unsubscribe: () => handlers.delete(name) };
      };
      unit = this.#options.createUnit(tenant, listen).then((created) => ({ unit: created, handlers }));
      // A unit that failed to start (JetStream unreachable, say) is tried again on the next request.
      unit.catch(() => this.#units.delete(tenant));
      this.#units.set(tenant, unit);
    }
    return unit;
  }

  #reply<T extends ChatReply | ControlReply>(message: BusMessage, reply: T): T {
    if (message.reply !== undefined) this.#options.bus.respond(message, JSON.stringify(reply));
    return reply;
  }
}

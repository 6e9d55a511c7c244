import type { Agent } from "../agent/agent-types.js";
import type { Bus, BusMessage, Subscription } from "../bus/bus.js";
import {
  type ChatReply,
  type ChatRequest,
  type ControlReply,
  type ControlRequest,
  errorReply,
  parseChatRequest,
  parseControlRequest,
} from "../bus/contract.js";
import { isOverMaxPayload } from "../bus/payload-size.js";
import { type AgentVerb, DEFAULT_PREFIX, parseAgentSubject } from "../bus/subjects.js";
import type { AgentRouting } from "../cluster/agent-routing.js";
import type { LeaseFence } from "../cluster/lease-fence.js";
import type { SessionCluster } from "../cluster/session-cluster.js";
import { SessionOwnedElsewhereError } from "../cluster/session-lease.js";
import { describeFailure, type SessionError } from "./describe-failure.js";
import { readRequestApprovals } from "./request-approvals.js";
import { readRequestDepth } from "./request-depth.js";
import { type ChatOutcome, SessionActor } from "./session-actor.js";
import { SessionHeartbeats } from "./session-heartbeats.js";
import {
  HostMemoryOverloadedError,
  type ManagerTimers,
  SessionManager,
  SessionManagerClosedError,
  SessionManagerOverloadedError,
} from "./session-manager.js";

/** How long `close()` lets running chats finish by default before cancelling them. */
export const DEFAULT_GRACE_MS = 30_000;

/** What the host hands an agent factory: the session's mailbox, for ToolContext.post. */
export interface SessionHooks {
  post(text: string, options?: { type?: string; stackable?: boolean }): void;
  /** Several hosts: the session's lease, checked before every history write and model request. */
  fence?: LeaseFence;
}

/**
 * How the host receives requests on `subject` (`<prefix>.agents.*.<verb>`) in `queue`. Default:
 * a plain bus subscription. On NATS, `$SRV` endpoints (src/host/contract-service.ts), which use
 * `handle`'s promise — the reply sent, once sent — for their statistics.
 */
export type RequestListener = (
  /** The endpoint's name (`chat`, `control`; `$SRV` shows it). */
  verb: string,
  subject: string,
  queue: string,
  handle: (message: BusMessage) => Promise<ChatReply | ControlReply>,
) => Subscription;

/** Builds the agent of one session, restoring its history (see create-session-agent.ts). */
export type SessionAgentFactory = (agent: string, session: string, hooks: SessionHooks) => Promise<Agent>;

export interface AgentHostOptions {
  bus: Bus;
  /** Subject prefix; default `agentloop`. */
  prefix?: string;
  /** The agents this host answers for; any other name gets `unknown_agent`. */
  agents: readonly string[];
  createAgent: SessionAgentFactory;
  /** Queue group shared by every host serving these subjects; default `<prefix>_host`. */
  queueGroup?: string;
  /** Mailbox limit per session; default 200. */
  maxQueue?: number;
  /** Idle sessions are passivated after this long; default 12 h. */
  idleTimeoutMs?: number;
  /** Live sessions at most (default 10,000); past it a new session gets `overloaded`. */
  maxSessions?: number;
  /**
   * Bytes the live sessions' messages may hold in memory, all together (default 512 MiB, or half
   * the heap limit if smaller): over it idle sessions are passivated, least recently used first, and
   * with none idle a chat gets `overloaded`.
   */
  maxMemoryBytes?: number;
  /**
   * Bytes one session's messages may hold in memory: a session over it is compacted before its next
   * chat, which gets `bad_request` if the session is still over. Default: no limit.
   */
  maxSessionBytes?: number;
  sweepIntervalMs?: number;
  /** How long `close()` waits for running chats by default (30 s). */
  graceMs?: number;
  now?: () => number;
  timers?: ManagerTimers;
  /** One-line notices (failed session creations, passivation problems). Default: none. */
  log?: (line: string) => void;
  /** Named in the session heartbeats; default host name, pid and a random suffix. */
  hostId?: string;
  /** How often a session with a request in hand beats; default 2 s (HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs?: number;
  /** How requests arrive; default plain subscriptions on the bus. */
  listen?: RequestListener;
  /**
   * Several hosts on one NATS system — session leases (one owner per session, fenced),
   * forwarding to the owner, request-id dedupe. See src/cluster/. Without it this host owns every
   * session it is asked about.
   */
  cluster?: SessionCluster;
  /**
   * On NATS: passes a request for an agent this host does not serve to a host that does (hosts
   * with different agents may share a prefix). Without it such a request gets `unknown_agent`.
   */
  routing?: AgentRouting;
}

/**
 * The agent host: answers `<prefix>.agents.<agent>.chat` and `.control` in a
 * queue group, validating every payload (a malformed one gets `bad_request` and the host goes on
 * serving), and routes each message to its session's actor. Sessions publish their events
 * through the agent factory's event listener on `<prefix>.events.<agent>.<session>.<Kind>`.
 */
export class AgentHost {
  readonly prefix: string;
  readonly agents: readonly string[];
  readonly sessions: SessionManager;
  readonly #bus: Bus;
  readonly #agentNames: ReadonlySet<string>;
  readonly #createAgent: SessionAgentFactory;
  readonly #queueGroup: string;
  readonly #maxQueue: number | undefined;
  readonly #maxSessionBytes: number | undefined;
  readonly #graceMs: number;
  readonly #now: (() => number) | undefined;
  readonly #log: (line: string) => void;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #heartbeats: SessionHeartbeats;
  readonly #listen: RequestListener;
  readonly #cluster: SessionCluster | undefined;
  readonly #routing: AgentRouting | undefined;
  #subscriptions: Subscription[] = [];
  #closing: Promise<void> | undefined;

  constructor(options: AgentHostOptions) {
    this.#bus = options.bus;
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.agents = [...options.agents];
    this.#agentNames = new Set(options.agents);
    this.#createAgent = options.createAgent;
    this.#queueGroup = options.queueGroup ?? `${this.prefix.replace(/\./g, "_")}_host`;
    this.#maxQueue = options.maxQueue;
    this.#maxSessionBytes = options.maxSessionBytes;
    this.#graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
    this.#now = options.now;
    this.#log = options.log ?? (() => {});
    this.#listen =
      options.listen ??
      ((_verb, subject, queue, handle) =>
        this.#bus.subscribe(subject, (message) => void handle(message), { queue }));
    this.#heartbeats = new SessionHeartbeats({
      bus: options.bus,
      prefix: this.prefix,
      ...(options.hostId === undefined ? {} : { hostId: options.hostId }),
      ...(options.heartbeatIntervalMs === undefined ? {} : { intervalMs: options.heartbeatIntervalMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    this.#cluster = options.cluster;
    this.#routing = options.routing;
    this.sessions = new SessionManager({
      createSession: (agent, session) => this.#createSession(agent, session),
      ...(options.cluster === undefined
        ? {}
        : { onSessionStopped: (agent, session) => options.cluster?.leases.release(agent, session) }),
      ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
      ...(options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions }),
      ...(options.maxMemoryBytes === undefined ? {} : { maxMemoryBytes: options.maxMemoryBytes }),
      ...(options.sweepIntervalMs === undefined ? {} : { sweepIntervalMs: options.sweepIntervalMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(options.timers === undefined ? {} : { timers: options.timers }),
      log: this.#log,
    });
    // A lease lost (not renewed in time, or taken over) stops its session here at once.
    this.#cluster?.onLost((agent, session, reason) => {
      this.#log(`session ${agent}/${session} stopped here: ${reason}`);
      void this.sessions.drop(agent, session, `this host lost the session: ${reason}`);
    });
  }

  /** Requests being handled right now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Subscribes and starts passivating idle sessions. */
  start(): this {
    if (this.#subscriptions.length > 0 || this.#closing !== undefined) return this;
    const handle = (message: BusMessage) => {
      const work = this.#handle(message);
      this.#track(work.then(() => {}));
      return work;
    };
    this.#subscriptions = [
      this.#listen("chat", `${this.prefix}.agents.*.chat`, this.#queueGroup, handle),
      this.#listen("control", `${this.prefix}.agents.*.control`, this.#queueGroup, handle),
    ];
    const cluster = this.#cluster;
    if (cluster !== undefined) {
      // Requests other hosts forward to this one, for the sessions it owns (no queue group).
      this.#subscriptions.push(
        this.#bus.subscribe(
          cluster.forwardedPattern,
          (message) => void handle(cluster.asAgentRequest(message)),
        ),
      );
    }
    const routing = this.#routing;
    if (routing !== undefined) {
      // Requests other hosts pass on for the agents this one serves (see AgentRouting).
      for (const agent of this.agents) {
        this.#subscriptions.push(
          this.#bus.subscribe(
            routing.patternFor(agent),
            (message) => void handle(routing.asAgentRequest(message)),
            { queue: this.#queueGroup },
          ),
        );
      }
    }
    this.sessions.start();
    return this;
  }

  /**
   * Graceful shutdown: stops accepting requests, lets running chats finish for up to `graceMs`
   * (or until `hurry` aborts: a second SIGTERM), then cancels what is left (those callers are
   * answered `cancelled`, their chats back-fill the history), waits until every session has let go
   * of its agent and every reply is sent. The bus stays open (its owner closes it).
   */
  close(options: { graceMs?: number; hurry?: AbortSignal } = {}): Promise<void> {
    this.#closing ??= (async () => {
      for (const subscription of this.#subscriptions) subscription.unsubscribe();
      this.#subscriptions = [];
      await this.sessions.close({
        graceMs: options.graceMs ?? this.#graceMs,
        ...(options.hurry === undefined ? {} : { hurry: options.hurry }),
      });
      await Promise.allSettled([...this.#inFlight]);
      await this.#cluster?.close();
      this.#heartbeats.close();
      await this.#bus.flush().catch(() => {});
    })();
    return this.#closing;
  }

  async #createSession(agent: string, session: string): Promise<SessionActor> {
    let actor: SessionActor | undefined;
    const hooks: SessionHooks = {
      // Posts before the actor exists cannot happen (tools run inside chats), but stay harmless.
      post: (text, postOptions) => actor?.post(text, postOptions),
    };
    // The session runs here only under this host's lease (else SessionOwnedElsewhereError).
    if (this.#cluster !== undefined) hooks.fence = await this.#cluster.leases.acquire(agent, session);
    try {
      const created = await this.#createAgent(agent, session, hooks);
      actor = new SessionActor({
        agent: created,
        ...(this.#maxQueue === undefined ? {} : { maxQueue: this.#maxQueue }),
        ...(this.#now === undefined ? {} : { now: this.#now }),
        ...(this.#maxSessionBytes === undefined ? {} : { maxSessionBytes: this.#maxSessionBytes }),
      });
      // What the session's last host left unfinished (its journal) runs first; a resumed
      // chat with a client request id answers that id's retries, and its reply is stored for later ones.
      const dedupe = this.#cluster?.dedupe;
      const journal = created.journal;
      void actor.resumeUnfinished(
        dedupe === undefined
          ? {}
          : {
              onResumed: (id, outcome) => {
                const reply = outcome.then((answer) => answer && chatReplyOf(session, answer, { id }));
                void dedupe.adopt(agent, session, id, reply).then(
                  () => journal?.forgetAnswer(id),
                  (error: unknown) =>
                    this.#log(
                      `could not answer request ${id} of ${agent}/${session}: ${describeFailure(error).message}`,
                    ),
                );
              },
            },
      );
      return actor;
    } catch (error) {
      this.#cluster?.leases.release(agent, session);
      this.#log(`could not start session ${agent}/${session}: ${describeFailure(error).message}`);
      throw error;
    }
  }

  #track(work: Promise<void>): void {
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work));
  }

  /** Answers one request; resolves with the reply sent. */
  async #handle(message: BusMessage): Promise<ChatReply | ControlReply> {
    try {
      if (message.malformed !== undefined)
        return this.#reply(message, errorReply("bad_request", message.malformed));
      const route = parseAgentSubject(this.prefix, message.subject);
      if (route === undefined) {
        const token = message.subject.split(".").at(-2) ?? "";
        return this.#reply(message, errorReply("bad_request", `invalid agent name ${JSON.stringify(token)}`));
      }
      if (!this.#agentNames.has(route.agent)) {
        if (await this.#routing?.passOn(route.agent, route.verb, message)) return { ok: true };
        return this.#reply(
          message,
          errorReply(
            "unknown_agent",
            `no agent named "${route.agent}" (this host serves: ${this.agents.join(", ")})`,
          ),
        );
      }
      if (route.verb === "chat") return await this.#handleChat(message, route.agent);
      return await this.#handleControl(message, route.agent);
    } catch (error) {
      // Only a bug gets here: answer `internal` and keep serving.
      this.#log(`internal error answering ${message.subject}: ${describeFailure(error).message}`);
      return this.#reply(message, errorReply("internal", describeFailure(error).message));
    }
  }

  async #handleChat(message: BusMessage, agent: string): Promise<ChatReply | ControlReply> {
    const parsed = parseChatRequest(message.data);
    if (!parsed.ok) return this.#reply(message, parsed);
    // The session beats until the reply is out, so the caller can tell "working" from "gone".
    const release = this.#heartbeats.track(agent, parsed.value.session);
    try {
      return await this.#routed(message, agent, "chat", parsed.value.session, () =>
        this.#answerChat(message, agent, parsed.value),
      );
    } finally {
      release();
    }
  }

  /**
   * Several hosts: runs `answer` when this host owns the session or can take it; forwards the request
   * to the host that owns it otherwise (that host answers the requester). A creation that lost
   * the race for the lease is forwarded to the winner.
   */
  async #routed<T extends ChatReply | ControlReply>(
    message: BusMessage,
    agent: string,
    verb: AgentVerb,
    session: string,
    answer: () => Promise<T>,
  ): Promise<T | ChatReply | ControlReply> {
    const cluster = this.#cluster;
    if (cluster === undefined) return answer();
    for (let attempt = 0; ; attempt++) {
      let owner: Awaited<ReturnType<SessionCluster["ownerElsewhere"]>>;
      try {
        owner = await cluster.ownerElsewhere(agent, session);
      } catch (error) {
        const reason = describeFailure(error).message;
        return this.#reply(message, errorReply("internal", `cannot read the session's lease: ${reason}`));
      }
      if (owner === undefined) {
        try {
          return await answer();
        } catch (error) {
          if (!(error instanceof SessionOwnedElsewhereError) || attempt > 2) throw error;
          continue;
        }
      }
      if (attempt <= 2 && !(await cluster.isReachable(owner, agent, verb))) {
        // The owner is gone (killed): its lease runs out within the TTL; then this host takes it.
        // Meanwhile this request is in hand here, so the session's heartbeat keeps the caller waiting.
        await cluster.untilExpired(owner);
        continue;
      }
      const refused = cluster.forward(owner, agent, verb, message);
      return refused === undefined ? { ok: true } : this.#reply(message, refused);
    }
  }

  async #answerChat(message: BusMessage, agent: string, request: ChatRequest): Promise<ChatReply> {
    const echo = request.id === undefined ? {} : { id: request.id };
    const depth = readRequestDepth(message.data);
    if (!depth.ok) return this.#reply(message, { ...depth, ...echo });
    const approvals = readRequestApprovals(message.data);
    if (!approvals.ok) return this.#reply(message, { ...approvals, ...echo });
    let chatId: string | undefined;
    const dedupe = this.#cluster?.dedupe;
    // False when the session could not even start (closing, full): no chat ran.
    let ran = true;
    const run = async (): Promise<ChatReply> => {
      try {
        const outcome = await this.sessions.use(
          agent,
          request.session,
          (actor) => {
            // The asking agent's approvals hold here too, before this chat is even queued.
            if (approvals.value.length > 0) actor.agent.inheritApprovals?.(approvals.value);
            return actor.chat({
              text: request.text,
              type: request.type,
              stackable: request.stackable,
              depth: depth.value,
              // Journaled with the chat: a chat resumed elsewhere answers this id's retries.
              ...(request.id === undefined || dedupe === undefined ? {} : { requestId: request.id }),
            });
          },
          { isChat: true },
        );
        if (outcome.ok) chatId = outcome.chatId;
        return chatReplyOf(request.session, outcome, echo);
      } catch (error) {
        if (error instanceof SessionOwnedElsewhereError) throw error;
        ran = false;
        return { ok: false, error: sessionStartError(error), ...echo };
      }
    };
    if (dedupe === undefined || request.id === undefined) return this.#reply(message, await run(), chatId);
    // One run per id. The session is taken first, so a request to forward marks nothing.
    await this.sessions.get(agent, request.session).catch((error: unknown) => {
      if (error instanceof SessionOwnedElsewhereError) throw error;
    });
    const id = request.id;
    const answer = await dedupe.answer(agent, request.session, id, async () => ({ reply: await run(), ran }));
    // Stored under the id: the journal need not keep the chat's answer any more.
    this.sessions.find(agent, request.session)?.agent.journal?.forgetAnswer(id);
    return this.#reply(message, answer, chatId);
  }

  async #handleControl(message: BusMessage, agent: string): Promise<ChatReply | ControlReply> {
    const parsed = parseControlRequest(message.data);
    if (!parsed.ok) return this.#reply(message, parsed);
    const release = this.#heartbeats.track(agent, parsed.value.session);
    try {
      return await this.#routed(message, agent, "control", parsed.value.session, async () => {
        let reply: ControlReply;
        try {
          reply = await this.#control(agent, parsed.value);
        } catch (error) {
          if (error instanceof SessionOwnedElsewhereError) throw error;
          reply = { ok: false, error: sessionStartError(error) };
        }
        return this.#reply(message, reply);
      });
    } finally {
      release();
    }
  }

  async #control(agent: string, request: ControlRequest): Promise<ControlReply> {
    if (request.command === "stop") {
      // Nothing runs in a session that is not live: no need to build it just to stop it.
      return this.sessions.find(agent, request.session)?.stop() ?? { ok: true };
    }
    if (request.command === "new") return this.sessions.use(agent, request.session, (actor) => actor.reset());
    if (request.command === "approve" || request.command === "deny") {
      // The session may have to be built: its approval may be parked in the history (a restart).
      const decision = {
        toolCallId: request.toolCallId ?? "",
        approved: request.command === "approve",
        ...(request.reason !== undefined ? { reason: request.reason } : {}),
        ...(request.arguments !== undefined ? { arguments: request.arguments } : {}),
      };
      return this.sessions.use(agent, request.session, (actor) => actor.decideToolCall(decision));
    }
    return this.sessions.use(agent, request.session, (actor) => actor.compact(request.topic));
  }

  /**
   * Sends the reply and resolves with what was sent; one over the bus's max payload becomes
   * `reply_too_large`, never a silent drop.
   */
  #reply<T extends ChatReply | ControlReply>(
    message: BusMessage,
    reply: T,
    chatId?: string,
  ): T | Extract<ChatReply, { ok: false }> {
    if (message.reply === undefined) return reply;
    const data = JSON.stringify(reply);
    if (!isOverMaxPayload(data, this.#bus.maxPayload)) {
      this.#bus.respond(message, data);
      return reply;
    }
    const tooLarge = replyTooLarge(Buffer.byteLength(data, "utf8"), this.#bus.maxPayload, chatId, reply);
    this.#log(`answered ${message.subject} with reply_too_large: ${tooLarge.error.message}`);
    this.#bus.respond(message, JSON.stringify(tooLarge));
    return tooLarge;
  }
}

/** A chat's outcome as the reply to its request (`echo`: the request's `id`, if it had one). */
function chatReplyOf(session: string, outcome: ChatOutcome, echo: { id?: string }): ChatReply {
  return outcome.ok
    ? { ok: true, session, result: outcome.result, usage: outcome.usage, ...echo }
    : { ok: false, error: outcome.error, ...echo };
}

/** The `reply_too_large` answer: the client reads the full result from the history by `chatId`. */
function replyTooLarge(
  bytes: number,
  maxPayload: number,
  chatId: string | undefined,
  reply: ChatReply | ControlReply,
): Extract<ChatReply, { ok: false }> {
  const where = chatId === undefined ? "" : ` (chat ${chatId})`;
  return {
    ...errorReply(
      "reply_too_large",
      `the reply is ${bytes} bytes, over the bus's ${maxPayload}-byte limit; the full result is in the session history${where}`,
    ),
    ...(chatId === undefined ? {} : { chatId }),
    ...("id" in reply && reply.id !== undefined ? { id: reply.id } : {}),
  };
}

/** Why a session could not take a message: the host is closing, full, or the session failed to start. */
export function sessionStartError(error: unknown): SessionError {
  // The host's own refusals answer with their code from the table; a failed start is `internal`.
  if (
    error instanceof SessionManagerClosedError ||
    error instanceof SessionManagerOverloadedError ||
    error instanceof HostMemoryOverloadedError
  ) {
    return describeFailure(error);
  }
  return { code: "internal", message: `cannot start the session: ${describeFailure(error).message}` };
}

import type { Service, ServiceMsg } from "@nats-io/services";
import { type NatsConnection, headers as natsHeaders, type Subscription } from "@nats-io/transport-node";
import { MAX_PAYLOAD_BYTES } from "../bus/contract.js";
import {
  addCountedEndpoint,
  EndpointCounts,
  type EndpointOutcome,
  servicesOn,
} from "../bus/counted-endpoint.js";
import { toBusMessage } from "../bus/inbound-message.js";
import { isValidName, NAME_PATTERN } from "../bus/subjects.js";
import { FORWARD_HOPS_HEADER, MAX_FORWARD_HOPS } from "../cluster/session-cluster.js";
import { describeChain, isOnChain, readLineageHeaders } from "../contract/chat-lineage.js";
import { readParentLease } from "../contract/parent-lease.js";
import { type AgentHost, sessionStartError } from "../host/agent-host.js";
import type { ChatOutcome, SessionActor } from "../host/session-actor.js";
import { VERSION } from "../version.js";
import { AnswerGate } from "./answer-gate.js";
import { ApprovalQueries } from "./approval-queries.js";
import { LivenessQueries } from "./liveness-queries.js";
import { parsePromptPayload } from "./prompt-envelope.js";
import { PromptStream } from "./prompt-stream.js";
import {
  CONTRACT_PREFIX_METADATA,
  DEFAULT_INSTANCE,
  DEFAULT_OWNER,
  instanceOf,
  PROMPT_QUEUE_GROUP,
  PROTOCOL_SERVICE_NAME,
  PROTOCOL_VERSION,
  protocolSubject,
} from "./protocol-subjects.js";
import {
  errorStatusOf,
  formatPayloadSize,
  type ProtocolErrorStatus,
  responseChunk,
} from "./stream-chunks.js";
import { StreamCoalescer } from "./stream-coalescer.js";
import type { Heartbeat } from "./wire.js";

/** Heartbeats every 5 s by default ("every few seconds", §8). */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000;

/** An `ack` keep-alive (and liveness probe) every 10 s while a chat runs: well inside callers' 60 s. */
export const DEFAULT_KEEP_ALIVE_MS = 10_000;

export interface AgentProtocolHostOptions {
  connection: NatsConnection;
  /** The running host: its agents are registered, its sessions answer the prompts. */
  host: AgentHost;
  /** The `owner` token (`--owner`); default `agentloop`. */
  owner?: string;
  /**
   * Whether a prompt's sender may answer the approval queries of its own chat (the agent's
   * `approval.selfApprove`). Default: no agent allows it; an approver decides on the control subject.
   */
  canSelfApprove?: (agent: string) => boolean;
  /** One-line notices: a refused approval answer, naming the rule it broke. Default: none. */
  log?: (line: string) => void;
  /**
   * Whether a session other than `default` was ever used (it has a stored history), for `status`:
   * a session never used answers 404. A live session always counts. Default: only live ones;
   * `undefined` from it means "cannot tell", answered as existing.
   */
  sessionExists?: (agent: string, session: string) => boolean | undefined;
  /** Heartbeat period; `interval_s` says it in whole seconds (at least 1). */
  heartbeatIntervalMs?: number;
  keepAliveMs?: number;
  /**
   * `--liveness-query`: a chat that ran this long asks its caller a liveness `query` (and again
   * this long after each answer); unanswered within {@link livenessReplyMs}, the chat is stopped.
   * This is how a caller that cancels but stays connected (the official clients) stops its chat.
   * Default: off (a caller that does not answer queries would lose its long chats).
   */
  livenessQueryMs?: number;
  /** How long a liveness question waits for its answer (default 60 s). */
  livenessReplyMs?: number;
  /** Stream coalescing: a `response` chunk per this long at most (default 50 ms)… */
  coalesceMs?: number;
  /** …or per this many bytes (default 4 KB). */
  coalesceBytes?: number;
  now?: () => Date;
}

/**
 * The host side of the Synadia Agent Protocol for NATS v0.3 (docs: README "Agent Protocol").
 *
 * Each configured agent registers one `$SRV` service named `agents` (metadata `agent`, `owner`,
 * `protocol_version`, `session: default`) with four endpoints, all in queue group `agents`:
 *
 * - `prompt` on `agents.prompt.<agent>.<owner>.default` and `status` on `agents.status.…default`:
 *   the agent's default session, what discovery shows;
 * - `prompt-session` and `status-session` on `agents.prompt|status.<agent>.<owner>.*`: the 5th
 *   token names any session of the agent (`[A-Za-z0-9_-]{1,64}`, created on first use like on our
 *   own contract), so a caller reaches a named session without one registration per idle session.
 *   (A message to `….default` matches both subscriptions; being in one queue group, one answers.)
 *
 * A prompt is one chat through the session's mailbox, as a non-stackable `user` message on our
 * own contract (same queue limit, same order). A tool call of that chat awaiting approval is asked
 * as a mid-stream `query` (see {@link ApprovalQueries}). Heartbeats go out for each default instance.
 */
export class AgentProtocolHost {
  readonly owner: string;
  readonly #connection: NatsConnection;
  readonly #host: AgentHost;
  readonly #heartbeatIntervalMs: number;
  readonly #keepAliveMs: number;
  readonly #livenessQueryMs: number | undefined;
  readonly #livenessReplyMs: number | undefined;
  readonly #coalesceMs: number | undefined;
  readonly #coalesceBytes: number | undefined;
  readonly #now: () => Date;
  readonly #canSelfApprove: (agent: string) => boolean;
  readonly #log: (line: string) => void;
  readonly #sessionExists: (agent: string, session: string) => boolean | undefined;
  readonly #services = new Map<string, Service>();
  readonly #streams = new Set<Promise<EndpointOutcome>>();
  /** Prompts other hosts forward here, for sessions of shards this host owns. */
  readonly #forwarded: Subscription[] = [];
  #heartbeat: NodeJS.Timeout | undefined;

  private constructor(options: AgentProtocolHostOptions) {
    this.owner = options.owner ?? DEFAULT_OWNER;
    this.#connection = options.connection;
    this.#host = options.host;
    this.#heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    this.#keepAliveMs = options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
    this.#livenessQueryMs = options.livenessQueryMs;
    this.#livenessReplyMs = options.livenessReplyMs;
    this.#coalesceMs = options.coalesceMs;
    this.#coalesceBytes = options.coalesceBytes;
    this.#now = options.now ?? (() => new Date());
    this.#canSelfApprove = options.canSelfApprove ?? (() => false);
    this.#log = options.log ?? (() => {});
    this.#sessionExists = options.sessionExists ?? (() => false);
  }

  /** Registers every agent and starts the heartbeats. */
  static async start(options: AgentProtocolHostOptions): Promise<AgentProtocolHost> {
    const protocolHost = new AgentProtocolHost(options);
    try {
      for (const agent of options.host.agents) await protocolHost.#register(agent);
    } catch (error) {
      await protocolHost.stop();
      throw error;
    }
    protocolHost.#beat();
    protocolHost.#heartbeat = setInterval(
      () => protocolHost.#beat(),
      protocolHost.#heartbeatIntervalMs,
    ).unref();
    return protocolHost;
  }

  /** The micro service of each agent. */
  get services(): ReadonlyMap<string, Service> {
    return this.#services;
  }

  /** Stops heartbeats and takes no more prompts; running streams go on (see {@link drained}). */
  async stop(): Promise<void> {
    for (const subscription of this.#forwarded.splice(0)) subscription.unsubscribe();
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    await Promise.allSettled([...this.#services.values()].map((service) => service.stop()));
  }

  /** Resolves once every running stream has ended (after the host closed its sessions). */
  async drained(): Promise<void> {
    await Promise.allSettled([...this.#streams]);
  }

  async #register(agent: string): Promise<void> {
    const counts = new EndpointCounts();
    const service = await servicesOn(this.#connection).add({
      name: PROTOCOL_SERVICE_NAME,
      version: VERSION,
      description: `agentloop agent ${agent}`,
      metadata: {
        agent,
        owner: this.owner,
        protocol_version: PROTOCOL_VERSION,
        session: DEFAULT_INSTANCE,
        // Unknown keys are kept by callers: this one tells agentloop's own doors (the MCP server)
        // which subject prefix of our NATS contract reaches the agent.
        [CONTRACT_PREFIX_METADATA]: this.#host.prefix,
      },
      queue: PROMPT_QUEUE_GROUP,
      statsHandler: counts.statsHandler(),
    });
    this.#services.set(agent, service);
    const maxPayload = this.#connection.info?.max_payload ?? MAX_PAYLOAD_BYTES;
    const promptMetadata = { max_payload: formatPayloadSize(maxPayload), attachments_ok: "false" };
    const prompt = (message: ServiceMsg) => this.#track(this.#prompt(agent, message));
    const status = (message: ServiceMsg) => Promise.resolve(this.#status(agent, message));
    const subject = (verb: "prompt" | "status", name: string) =>
      protocolSubject(verb, agent, this.owner, name);
    const queue = PROMPT_QUEUE_GROUP;
    const forwardSubject = this.#host.forwardSubject;
    if (forwardSubject !== undefined) {
      // `<prefix>.hosts.<host>.prompt.<agent>.<session>`: a prompt another host took for a session
      // whose shard is here, answered as if it had come on the agent's own subject.
      const forwarded = this.#connection.subscribe(`${forwardSubject}.prompt.${agent}.*`, {
        callback: (error, message) => {
          if (error !== null) return;
          const session = message.subject.slice(message.subject.lastIndexOf(".") + 1);
          const asPrompt = {
            subject: subject("prompt", session),
            data: message.data,
            reply: message.reply,
            headers: message.headers,
          } as unknown as ServiceMsg;
          void prompt(asPrompt);
        },
      });
      this.#forwarded.push(forwarded);
    }
    addCountedEndpoint(service, counts, "prompt", {
      subject: subject("prompt", DEFAULT_INSTANCE),
      queue,
      metadata: promptMetadata,
      handle: prompt,
    });
    addCountedEndpoint(service, counts, "status", {
      subject: subject("status", DEFAULT_INSTANCE),
      queue,
      handle: status,
    });
    addCountedEndpoint(service, counts, "prompt-session", {
      subject: subject("prompt", "*"),
      queue,
      metadata: { ...promptMetadata, session: "*" },
      handle: prompt,
    });
    addCountedEndpoint(service, counts, "status-session", {
      subject: subject("status", "*"),
      queue,
      metadata: { session: "*" },
      handle: status,
    });
  }

  #track(stream: Promise<EndpointOutcome>): Promise<EndpointOutcome> {
    this.#streams.add(stream);
    void stream.finally(() => this.#streams.delete(stream));
    return stream;
  }

  #heartbeatOf(agent: string, session: string): Heartbeat {
    return {
      agent,
      owner: this.owner,
      session,
      instance_id: this.#services.get(agent)?.info().id ?? "",
      ts: this.#now().toISOString(),
      // Callers read it as whole seconds (the reference SDKs parse an integer).
      interval_s: Math.max(1, Math.round(this.#heartbeatIntervalMs / 1000)),
    };
  }

  #beat(): void {
    for (const agent of this.#services.keys()) {
      const subject = protocolSubject("hb", agent, this.owner, DEFAULT_INSTANCE);
      try {
        this.#connection.publish(subject, JSON.stringify(this.#heartbeatOf(agent, DEFAULT_INSTANCE)));
      } catch {
        // Closing: the next heartbeat (if any) tells.
      }
    }
  }

  #status(agent: string, message: ServiceMsg): EndpointOutcome {
    const session = instanceOf(message.subject) ?? "";
    if (!isValidName(session) || !this.#isKnownSession(agent, session)) {
      const reason = isValidName(session)
        ? `no session ${JSON.stringify(session)} of agent "${agent}": it was never used`
        : unknownSession(session);
      message.respondError(404, reason, JSON.stringify({ code: "unknown_session", message: reason }));
      return { isError: true, reason };
    }
    message.respond(JSON.stringify(this.#heartbeatOf(agent, session)));
    return { isError: false };
  }

  /** `default` is advertised, so it always exists; another session once it is live or stored. */
  #isKnownSession(agent: string, session: string): boolean {
    if (session === DEFAULT_INSTANCE) return true;
    if (this.#host.sessions.find(agent, session) !== undefined) return true;
    return this.#sessionExists(agent, session) ?? true;
  }

  async #prompt(agent: string, message: ServiceMsg): Promise<EndpointOutcome> {
    const replySubject = message.reply;
    if (!replySubject) return { isError: true, reason: "a prompt without a reply subject" };
    const session = instanceOf(message.subject) ?? "";
    if (!isValidName(session))
      return this.#refuse(replySubject, 404, "unknown_session", unknownSession(session));
    const inbound = toBusMessage(message, { maxBytes: MAX_PAYLOAD_BYTES });
    if (inbound.malformed !== undefined)
      return this.#refuse(replySubject, 400, "bad_request", inbound.malformed);
    const parsed = parsePromptPayload(inbound.data);
    if (!parsed.ok) return this.#refuse(replySubject, 400, "bad_request", parsed.reason);
    // An agentloop caller's place in its agent tree: a question coming back to a session already
    // waiting on this chain is refused at once (else both would wait on each other until a timeout).
    const tree = readLineageHeaders(inbound.headers);
    if (!tree.ok) return this.#refuse(replySubject, 400, "bad_request", tree.message);
    const { lineage, traceparent } = tree;
    if (lineage !== undefined && isOnChain(lineage.chain, agent, session)) {
      const reason = `${agent}/${session} is already waiting on this chain (${describeChain(lineage.chain)}): asking it again would wait on itself`;
      return this.#refuse(replySubject, errorStatusOf("cycle"), "cycle", reason);
    }
    const lease = readParentLease(inbound.headers);
    if (!lease.ok) return this.#refuse(replySubject, 400, "bad_request", lease.message);
    if ((parsed.value.attachments?.length ?? 0) > 0) {
      return this.#refuse(
        replySubject,
        400,
        "bad_request",
        "this agent takes no attachments (attachments_ok is false)",
      );
    }
    // The session's shard may live on another host: the prompt goes there, which streams the answer.
    const hops = Number(message.headers?.get(FORWARD_HOPS_HEADER) || "0") || 0;
    const location = await this.#host.locate(agent, session, hops);
    if (location.where === "unavailable") {
      return this.#refuse(replySubject, 503, "unavailable", location.reason);
    }
    if (location.where === "forward") {
      if (hops >= MAX_FORWARD_HOPS) {
        return this.#refuse(
          replySubject,
          503,
          "unavailable",
          "the session's owner kept changing; retry the prompt",
        );
      }
      const forwardedHeaders = natsHeaders();
      for (const key of message.headers?.keys() ?? [])
        forwardedHeaders.set(key, message.headers?.get(key) ?? "");
      forwardedHeaders.set(FORWARD_HOPS_HEADER, String(hops + 1));
      this.#connection.publish(`${location.subject}.prompt.${agent}.${session}`, message.data, {
        reply: replySubject,
        headers: forwardedHeaders,
      });
      return { isError: false };
    }
    const stream = new PromptStream({
      connection: this.#connection,
      replySubject,
      keepAliveMs: this.#keepAliveMs,
    });
    const coalescer = new StreamCoalescer({
      send: (text) => stream.send(responseChunk(text)),
      ...(this.#coalesceMs === undefined ? {} : { intervalMs: this.#coalesceMs }),
      ...(this.#coalesceBytes === undefined ? {} : { maxBytes: this.#coalesceBytes }),
    });
    const gate = new AnswerGate();
    let sessionActor: SessionActor | undefined;
    const queries = new ApprovalQueries({
      connection: this.#connection,
      acceptsSenderAnswers: this.#canSelfApprove(agent),
      log: this.#log,
      chatName: `${agent}/${session}`,
      send: (chunk) => {
        coalescer.flush();
        stream.send(chunk);
      },
      // The same path as the control subject's approve / deny: a call held further down this
      // chat's agent tree (its approval bubbled up here) is decided where it is held.
      decide: async (decision) =>
        sessionActor === undefined
          ? { ok: false, error: { code: "bad_request", message: "the chat has ended" } }
          : this.#host.decideToolCall(sessionActor, decision),
    });
    const liveness =
      this.#livenessQueryMs === undefined
        ? undefined
        : new LivenessQueries({
            connection: this.#connection,
            send: (chunk) => {
              coalescer.flush();
              stream.send(chunk);
            },
            everyMs: this.#livenessQueryMs,
            ...(this.#livenessReplyMs === undefined ? {} : { replyMs: this.#livenessReplyMs }),
          });
    // An agentloop chat asked this one and renews a lease on it: stopped once the renewals stop.
    const leased = this.#host.watchLease(agent, session, lineage, lease.lease);
    const stops = [stream.signal, liveness?.signal, leased?.signal].filter((stop) => stop !== undefined);
    const signal = stops.length === 1 ? stream.signal : AbortSignal.any(stops);
    let outcome: ChatOutcome;
    try {
      // A chat: the host's memory budget (--max-memory-bytes) is checked first, as on our contract.
      outcome = await this.#host.sessions.use(
        agent,
        session,
        (actor) => {
          sessionActor = actor;
          return actor.chat({
            text: parsed.value.prompt,
            signal,
            ...(lineage === undefined ? {} : { lineage, depth: lineage.depth }),
            ...(traceparent === undefined ? {} : { traceparent }),
            onEvent: (event) => {
              // A held tool call is asked mid-stream; a decision from anywhere ends the question.
              if (event.kind === "ToolApprovalRequested") queries.ask(event);
              else if (event.kind === "ToolApprovalResolved") queries.settled(event.toolCallId);
              const released = gate.push(event);
              if (released !== "") coalescer.push(released);
            },
          });
        },
        { isChat: true },
      );
    } catch (error) {
      outcome = { ok: false, error: sessionStartError(error) };
    } finally {
      location.done();
      queries.close();
      liveness?.close();
      leased?.close();
    }
    if (outcome.ok) coalescer.push(gate.remainder(outcome.result));
    coalescer.flush();
    if (outcome.ok) {
      stream.end();
      return { isError: false };
    }
    stream.fail(errorStatusOf(outcome.error.code), outcome.error.code, outcome.error.message);
    return { isError: true, reason: `${outcome.error.code}: ${outcome.error.message}` };
  }

  /** An error message and the terminator, without the `ack` (nothing started). */
  #refuse(replySubject: string, status: ProtocolErrorStatus, code: string, reason: string): EndpointOutcome {
    const stream = new PromptStream({
      connection: this.#connection,
      replySubject,
      keepAliveMs: this.#keepAliveMs,
      silent: true,
    });
    stream.fail(status, code, reason);
    return { isError: true, reason: `${code}: ${reason}` };
  }
}

function unknownSession(token: string): string {
  return `no session ${JSON.stringify(token)}: a session name matches ${NAME_PATTERN.source}`;
}

import type { ServerResponse } from "node:http";
import { type Event as AguiEvent, EventType, PROTOCOL_VERSION } from "@ag-ui/core";
import type { Bus } from "../../bus/bus.js";
import { NoRespondersError } from "../../bus/bus-errors.js";
import { MAX_PAYLOAD_BYTES, parseChatReply, parseControlReply } from "../../bus/contract.js";
import { requestWithHeartbeat } from "../../bus/request-with-heartbeat.js";
import { chatSubject, controlSubject, isValidName, sessionHeartbeatSubject } from "../../bus/subjects.js";
import { describeError } from "../../errors/describe-error.js";
import type { AgentEvent } from "../../events/types.js";
import type { HttpDoor, HttpDoorContext } from "../../http/http-door.js";
import { HttpError, readJsonBody, sendError } from "../../http/http-io.js";
import type { RouteRequest } from "../../http/http-router.js";
import { type EventPosition, formatEventId, isAfter, parseEventId, parseInterruptId } from "./agui-ids.js";
import { type AguiRunRequest, parseRunInput, type ResumeDecision } from "./agui-run-input.js";
import { AguiRunMapper } from "./agui-run-mapper.js";
import { AguiSse } from "./agui-sse.js";
import { OpenFraming } from "./open-framing.js";
import {
  type FeedItem,
  JetStreamEventSource,
  MemoryEventSource,
  type MemoryEventSourceOptions,
  type SessionEventSource,
} from "./session-event-feed.js";
import { ThreadHistory } from "./thread-history.js";

/** `POST /agui/<agent>`. */
const RUN_PATH = /^\/agui\/([^/]+)\/?$/;

export interface AguiDoorOptions {
  /** A chat's overall limit (it may wait hours for an approval). Default 24 h. */
  chatTimeoutMs?: number;
  /** An approve / deny request's limit. Default 10 s. */
  controlTimeoutMs?: number;
  /** Interval of the SSE keep-alive comment. Default 15 s. */
  keepAliveMs?: number;
  /** Bounds of the in-memory event buffer used without JetStream. */
  memory?: MemoryEventSourceOptions;
}

/**
 * The AG-UI 1.0 door: `POST /agui/<agent>` takes a `RunAgentInput` (threadId = session) and answers
 * with the run as Server-Sent Events, mapped from the session's agentloop events (see
 * {@link AguiRunMapper}). The chat goes in over the bus contract (`<prefix>.agents.<agent>.chat`),
 * so the door works against whichever host owns the session; the events come from the JetStream
 * event log (or, on the in-process bus, from the door's own buffer), so every event has an id and a
 * reconnect with `Last-Event-ID` gets exactly the events after it. A client going away does not
 * stop the chat: it reconnects, or the chat finishes on its own.
 *
 * @example
 * ```ts
 * const server = await startUiServer({ bus, doors: [createAguiDoor()] });
 * // then, in a web app: new HttpAgent({ url: `${origin}/agui/assistant`, threadId: "s1" })
 * ```
 */
export function createAguiDoor(options: AguiDoorOptions = {}): HttpDoor {
  let runs: AguiRuns | undefined;
  return {
    name: "agui",
    pathPrefix: "/agui/",
    isStreamPath: (path) => RUN_PATH.test(path),
    routes(context) {
      runs = new AguiRuns(context, options);
      const live = runs;
      return [{ method: "POST", path: RUN_PATH, handle: (request) => live.handle(request) }];
    },
    async close() {
      runs?.close();
    },
  };
}

/** How a chat request ended, as far as the run needs to know. */
type ReplyOutcome = { ok: true } | { ok: false; code: string; message: string };

/** The AG-UI runs of one server: what they share, and what `close()` must end. */
class AguiRuns {
  readonly #bus: Bus;
  readonly #prefix: string;
  readonly #jetStream: JetStreamEventSource | undefined;
  readonly #options: AguiDoorOptions;
  readonly #open = new Set<AbortController>();
  #memory: MemoryEventSource | undefined;

  constructor(context: HttpDoorContext, options: AguiDoorOptions) {
    this.#bus = context.bus;
    this.#prefix = context.prefix;
    this.#options = options;
    this.#jetStream =
      context.natsConnection === undefined
        ? undefined
        : new JetStreamEventSource(context.natsConnection, context.prefix);
    // Without JetStream the buffer must listen from the start: a reconnect can only get what it saw.
    if (this.#jetStream === undefined)
      this.#memory = new MemoryEventSource(this.#bus, this.#prefix, options.memory);
  }

  close(): void {
    for (const controller of this.#open) controller.abort();
    this.#open.clear();
    this.#memory?.close();
  }

  async handle({ request, response, url, params }: RouteRequest): Promise<void> {
    const agent = decodePart(params[0] ?? "");
    if (agent === undefined || !isValidName(agent)) {
      throw new HttpError(404, "not_found", "no such agent: an agent name matches [A-Za-z0-9_-]{1,64}");
    }
    const sse = new AguiSse(response, this.#options.keepAliveMs ?? 15_000);
    try {
      await this.#handleRun(agent, sse, { request, response, url, params });
    } catch (error) {
      // A failure of the door itself (the event log unreachable…): the protocol's error, not a cut stream.
      if (error instanceof HttpError && !sse.isOpen) throw error;
      runError(sse, "internal", describeError(error));
    } finally {
      sse.end();
    }
  }

  async #handleRun(agent: string, sse: AguiSse, { request, response, url }: RouteRequest): Promise<void> {
    let body: unknown;
    try {
      body = await readJsonBody(request, MAX_PAYLOAD_BYTES);
    } catch (error) {
      if (!(error instanceof HttpError)) throw error;
      return runError(sse, "bad_request", error.message);
    }
    const parsed = parseRunInput(body);
    if (!parsed.ok) return runError(sse, "bad_request", parsed.message);
    const lastEventId = headerValue(request.headers["last-event-id"]) ?? url.searchParams.get("lastEventId");
    let last: EventPosition | undefined;
    if (lastEventId !== null && lastEventId !== undefined) {
      last = parseEventId(lastEventId);
      if (last === undefined) {
        return runError(
          sse,
          "bad_request",
          `Last-Event-ID ${JSON.stringify(lastEventId)} is not an id of this door`,
        );
      }
    }
    // The feed follows the client: gone, it stops reading. The chat itself is not the client's to stop.
    const reading = new AbortController();
    this.#open.add(reading);
    response.on("close", () => reading.abort());
    try {
      const source = await this.#source();
      const run = { agent, input: parsed.value, sse, response, source, signal: reading.signal };
      if (last !== undefined) await this.#reconnect(run, last);
      else if (parsed.value.kind === "resume") await this.#resume(run, parsed.value.resume);
      else await this.#chat(run, parsed.value.text);
    } finally {
      this.#open.delete(reading);
      reading.abort();
    }
  }

  /** JetStream when the event log exists; else this door's own buffer. */
  async #source(): Promise<SessionEventSource> {
    if (this.#jetStream !== undefined && (await this.#jetStream.isAvailable())) return this.#jetStream;
    this.#memory ??= new MemoryEventSource(this.#bus, this.#prefix, this.#options.memory);
    return this.#memory;
  }

  /**
   * A new chat: the text goes to the agent, and the run is the first ChatStarted of the thread with
   * that text after it was sent. The headers wait for a sign that the agent exists (a heartbeat of
   * the session, the chat's start, or the reply), so an unknown agent is still a 404.
   */
  async #chat(run: Run, text: string): Promise<void> {
    const { agent, input, sse, source } = run;
    const baseline = await source.lastSeq();
    const feed = source.feed(agent, input.threadId, run.signal)[Symbol.asyncIterator]();
    const beat = new Promise<"beat">((resolve) => {
      const subscription = this.#bus.subscribe(
        sessionHeartbeatSubject(this.#prefix, agent, input.threadId),
        () => {
          subscription.unsubscribe();
          resolve("beat");
        },
      );
      run.signal.addEventListener("abort", () => subscription.unsubscribe(), { once: true });
    });
    await this.#bus.flush();
    let reply: Promise<ReplyOutcome | "ignored"> = this.#sendChat(agent, input.threadId, text);
    let waitBeat: Promise<"beat" | "ignored"> = beat;
    const history = new ThreadHistory();
    let next = feed.next();
    for (;;) {
      const winner = await Promise.race([next, reply, waitBeat]);
      if (winner === "ignored") continue;
      if (winner === "beat") {
        sse.open();
        waitBeat = never();
        continue;
      }
      if ("ok" in winner) {
        if (winner.ok) {
          // Answered before the log showed the chat (the log lags the reply a little): keep reading.
          reply = never();
          continue;
        }
        return failBeforeStart(run, winner);
      }
      if (winner.done) return;
      next = feed.next();
      const item = winner.value;
      if ("caughtUp" in item) continue;
      if (item.seq > baseline && item.event.kind === "ChatStarted" && item.event.text === text) {
        sse.open();
        return this.#stream(run, feed, next, history, item, undefined, []);
      }
      history.add(item.event);
    }
  }

  /** Answers the interrupts (approve / deny, bound to the arguments shown), then follows the chat on. */
  async #resume(run: Run, decisions: ResumeDecision[]): Promise<void> {
    const { agent, input, source } = run;
    const wanted = new Map<number, { decision: ResumeDecision; toolCallId: string }>();
    for (const decision of decisions) {
      const named = parseInterruptId(decision.interruptId);
      if (named === undefined) {
        return runError(
          run.sse,
          "bad_request",
          `interrupt ${JSON.stringify(decision.interruptId)} is not one of this door's`,
        );
      }
      wanted.set(named.seq, { decision, toolCallId: named.toolCallId });
    }
    const feed = source.feed(agent, input.threadId, run.signal)[Symbol.asyncIterator]();
    const held: Array<{ seq: number; event: AgentEvent }> = [];
    for (;;) {
      const result = await feed.next();
      if (result.done) return;
      if ("caughtUp" in result.value) break;
      held.push(result.value);
    }
    const approvals: Array<{
      seq: number;
      event: Extract<AgentEvent, { kind: "ToolApprovalRequested" }>;
      decision: ResumeDecision;
    }> = [];
    for (const [seq, { decision, toolCallId }] of wanted) {
      const event = held.find((item) => item.seq === seq)?.event;
      if (event?.kind !== "ToolApprovalRequested" || event.toolCallId !== toolCallId) {
        return runError(
          run.sse,
          "bad_request",
          `interrupt ${JSON.stringify(decision.interruptId)} names no approval this thread asked for`,
        );
      }
      approvals.push({ seq, event, decision });
    }
    for (const { event, decision } of approvals) {
      const outcome = await this.#decide(agent, input.threadId, event, decision);
      if (!outcome.ok) return failBeforeStart(run, outcome);
    }
    approvals.sort((a, b) => a.seq - b.seq);
    const anchor = approvals[0]!;
    const history = new ThreadHistory();
    const after: Array<{ seq: number; event: AgentEvent }> = [];
    for (const item of held) {
      if (item.seq < anchor.seq) history.add(item.event);
      else if (item.seq > anchor.seq) after.push(item);
    }
    run.sse.open();
    const answered = approvals.map((approval) => approval.event.toolCallId);
    return this.#stream(run, feed, feed.next(), history, anchor, undefined, answered, after);
  }

  /**
   * `Last-Event-ID: <anchor>.<seq>.<index>`: the run is mapped again from the log, from its anchor,
   * and only what comes after the id is sent, behind framing events without ids (RUN_STARTED and the
   * starts of whatever was open) so that a client checking the event order accepts the rest.
   */
  async #reconnect(run: Run, last: EventPosition): Promise<void> {
    const { agent, input, source } = run;
    const feed = source.feed(agent, input.threadId, run.signal)[Symbol.asyncIterator]();
    const history = new ThreadHistory();
    for (;;) {
      const result = await feed.next();
      if (result.done) return;
      const item = result.value;
      if ("caughtUp" in item) continue;
      if (item.seq < last.anchor) {
        history.add(item.event);
        continue;
      }
      const { event } = item;
      const isAnchor =
        item.seq === last.anchor && (event.kind === "ChatStarted" || event.kind === "ToolApprovalRequested");
      if (!isAnchor) {
        const held =
          source.kind === "memory" ? " (this door keeps events in memory: a restart forgets them)" : "";
        return runError(
          run.sse,
          "bad_request",
          `Last-Event-ID ${formatEventId(last)} names no run of this thread${held}`,
        );
      }
      run.sse.open();
      const answered = event.kind === "ToolApprovalRequested" ? [event.toolCallId] : [];
      return this.#stream(run, feed, feed.next(), history, item, last, answered);
    }
  }

  /** Sends the run: the opening events, then the chat's events as they come, until the run ends. */
  async #stream(
    run: Run,
    feed: AsyncIterator<FeedItem, void, undefined>,
    firstNext: Promise<IteratorResult<FeedItem, void>>,
    history: ThreadHistory,
    anchor: { seq: number; event: AgentEvent },
    last: EventPosition | undefined,
    answered: readonly string[],
    heldAfter: ReadonlyArray<{ seq: number; event: AgentEvent }> = [],
  ): Promise<void> {
    const { input, sse } = run;
    history.add(anchor.event);
    const mapper = new AguiRunMapper({
      threadId: input.threadId,
      runId: input.runId,
      chatId: anchor.event.chatId,
      knownToolCalls: history.toolCallIds(),
      answeredApprovals: answered,
    });
    const framing = new OpenFraming();
    let isFramed = last === undefined;
    const emit = (events: AguiEvent[], seq: number): void => {
      events.forEach((event, index) => {
        const position = { anchor: anchor.seq, seq, index };
        if (last !== undefined && !isAfter(position, last)) {
          framing.observe(event);
          return;
        }
        if (!isFramed) {
          for (const opening of framing.reopen(event)) sse.send(opening);
          isFramed = true;
        }
        sse.send(event, formatEventId(position));
      });
    };
    emit(
      [
        {
          type: EventType.RUN_STARTED,
          threadId: input.threadId,
          runId: input.runId,
          protocolVersion: PROTOCOL_VERSION,
        },
        { type: EventType.MESSAGES_SNAPSHOT, messages: history.messages() },
        { type: EventType.STATE_SNAPSHOT, snapshot: history.state() },
      ],
      anchor.seq,
    );
    for (const item of heldAfter) {
      emit(mapper.map(item.event, item.seq), item.seq);
      if (mapper.isDone) return;
    }
    let next = firstNext;
    for (;;) {
      const result = await next;
      if (result.done) return;
      next = feed.next();
      const item = result.value;
      if ("caughtUp" in item) continue;
      emit(mapper.map(item.event, item.seq), item.seq);
      if (mapper.isDone) {
        // Let go of the feed now: the generator's cleanup deletes its consumer.
        void feed.return?.();
        return;
      }
    }
  }

  /**
   * The chat request, on its own: it outlives the HTTP request (a run that ends on an approval, a
   * client that reconnects), and is only aborted when the door closes.
   */
  #sendChat(agent: string, session: string, text: string): Promise<ReplyOutcome> {
    const controller = new AbortController();
    this.#open.add(controller);
    const subject = chatSubject(this.#prefix, agent);
    return requestWithHeartbeat(this.#bus, subject, JSON.stringify({ session, text }), {
      heartbeatSubject: sessionHeartbeatSubject(this.#prefix, agent, session),
      timeoutMs: this.#options.chatTimeoutMs ?? 24 * 60 * 60 * 1000,
      signal: controller.signal,
    })
      .then((message): ReplyOutcome => {
        const reply = parseChatReply(message.data);
        if (!reply.ok) return { ok: false, code: "bad_reply", message: reply.error.message };
        return reply.value.ok ? { ok: true } : { ok: false, ...reply.value.error };
      })
      .catch((error: unknown): ReplyOutcome => replyFailure(error))
      .finally(() => this.#open.delete(controller));
  }

  /** `approve` / `deny` on the control subject, with the arguments the approver was shown. */
  async #decide(
    agent: string,
    session: string,
    event: Extract<AgentEvent, { kind: "ToolApprovalRequested" }>,
    decision: ResumeDecision,
  ): Promise<ReplyOutcome> {
    const command = {
      session,
      command: decision.approved ? "approve" : "deny",
      toolCallId: event.toolCallId,
      arguments: event.arguments,
      ...(decision.reason === undefined ? {} : { reason: decision.reason }),
    };
    try {
      const message = await this.#bus.request(controlSubject(this.#prefix, agent), JSON.stringify(command), {
        timeoutMs: this.#options.controlTimeoutMs ?? 10_000,
      });
      const reply = parseControlReply(message.data);
      if (!reply.ok) return { ok: false, code: "bad_reply", message: reply.error.message };
      return reply.value.ok ? { ok: true } : { ok: false, ...reply.value.error };
    } catch (error) {
      return replyFailure(error);
    }
  }
}

/** What a run works with. */
interface Run {
  agent: string;
  input: AguiRunRequest;
  sse: AguiSse;
  response: ServerResponse;
  source: SessionEventSource;
  signal: AbortSignal;
}

/**
 * A refusal before the run started: an unknown agent is a 404 and nobody serving the system a 503
 * (plain JSON, as every refused web request here), while the headers are not yet out; anything
 * else, or anything once the stream is open, is the protocol's RUN_ERROR.
 */
function failBeforeStart(run: Run, failure: Extract<ReplyOutcome, { ok: false }>): void {
  if (!run.sse.isOpen && failure.code === "unknown_agent") {
    sendError(run.response, 404, "not_found", failure.message);
    return;
  }
  if (!run.sse.isOpen && failure.code === "no_responders") {
    sendError(run.response, 503, "unavailable", failure.message);
    return;
  }
  run.sse.send({
    type: EventType.RUN_STARTED,
    threadId: run.input.threadId,
    runId: run.input.runId,
    protocolVersion: PROTOCOL_VERSION,
  });
  run.sse.send({ type: EventType.RUN_ERROR, code: failure.code, message: failure.message });
}

/** A run refused outright: a stream holding only RUN_ERROR (the protocol allows it as the first event). */
function runError(sse: AguiSse, code: string, message: string): void {
  sse.send({ type: EventType.RUN_ERROR, code, message });
}

function replyFailure(error: unknown): Extract<ReplyOutcome, { ok: false }> {
  if (error instanceof NoRespondersError) return { ok: false, code: "no_responders", message: error.message };
  const code = (error as { code?: unknown }).code;
  return { ok: false, code: typeof code === "string" ? code : "bus_error", message: describeError(error) };
}

function never<T>(): Promise<T> {
  return new Promise<T>(() => {});
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function decodePart(part: string): string | undefined {
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}

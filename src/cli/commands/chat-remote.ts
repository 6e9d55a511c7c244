import { randomUUID } from "node:crypto";
import type { Bus, BusMessage } from "../../bus/bus.js";
import { BusConfigError, BusTimeoutError, NoRespondersError } from "../../bus/bus-errors.js";
import { parseChatReply } from "../../bus/contract.js";
import { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { HostSilentError, requestWithHeartbeat } from "../../bus/request-with-heartbeat.js";
import { chatSubject, sessionEventsPattern, sessionHeartbeatSubject } from "../../bus/subjects.js";
import { describeError } from "../../errors/describe-error.js";
import { EXIT_USER_MISTAKE, exitCodeOfReply } from "../../errors/error-code.js";
import { parseEventJson } from "../../events/parse-event.js";
import type { AgentEvent } from "../../events/types.js";
import { sleep } from "../../timers/sleep.js";
import type { CliContext } from "../cli-context.js";
import { natsIdentityOptions } from "../command-helpers.js";
import { createApprovalPrompt } from "./approval-prompt.js";
import { createEventPrinter } from "./event-printer.js";

/**
 * How long a remote chat may take before the CLI gives up waiting (the host keeps running it). A
 * host that dies is noticed much sooner: it stops beating on the session's heartbeat subject.
 */
export const REMOTE_CHAT_TIMEOUT_MS = 30 * 60 * 1000;

export interface RemoteChatArguments {
  agent: string;
  session: string;
  text: string;
  events: "jsonl" | "pretty" | "none";
}

/**
 * `agentloop chat` without `--local`: one message to a running host over NATS. Subscribes
 * to the session's events first, sends the chat request, prints the chat's events as the local mode
 * does (`jsonl`: one event per line, then `{"kind":"Result","result":…,"usage":…}`), and resolves
 * with the exit code: 0, or non-zero after one line on stderr.
 *
 * Only this chat's events are printed: those of the chat whose `ChatStarted` carries this text, so
 * another client's chat queued in the same session does not end up in the output.
 *
 * While waiting it watches the session's heartbeat: a host that dies (`kill -9`, a crash, a lost
 * connection) is reported within seconds, in one line, with exit code 1.
 */
export async function runRemoteChat(context: CliContext, args: RemoteChatArguments): Promise<number> {
  const { config } = context;
  const url = redactNatsUrl(config.natsUrl);
  const fail = (line: string, code = 1) => {
    context.stderr.write(`agentloop: ${line}\n`);
    return code;
  };
  let bus: NatsBus;
  try {
    bus = await NatsBus.connect({
      url: config.natsUrl,
      name: "agentloop chat",
      // Watching the session's events or heartbeat refused: said, and the chat goes on without it.
      onSubscriptionError: (error, subject) =>
        context.stderr.write(
          `agentloop: cannot watch ${subject} (${describeError(error)}); the chat goes on without it\n`,
        ),
      ...natsIdentityOptions(config),
    });
  } catch (error) {
    if (error instanceof BusConfigError) return fail(describeError(error), EXIT_USER_MISTAKE);
    return fail(
      `cannot reach NATS at ${url}: ${describeError(error)} (run \`agentloop up\`, or chat with --local)`,
    );
  }
  try {
    return await chatThroughBus(context, args, bus, url);
  } finally {
    await bus.close();
  }
}

/**
 * One chat request on `bus` (NATS, or the in-process bus of `chat --local --agents`): prints the
 * chat's events and its answer, asks its tool approvals on stdin, and resolves with the exit code.
 * `where` names the bus in messages. The caller closes the bus.
 */
export async function chatThroughBus(
  context: CliContext,
  args: RemoteChatArguments,
  bus: Bus,
  where: string,
): Promise<number> {
  const { config } = context;
  const url = where;
  const fail = (line: string, code = 1) => {
    context.stderr.write(`agentloop: ${line}\n`);
    return code;
  };
  const printer = createEventPrinter(context, args.events);
  const approvals = createApprovalPrompt({
    bus,
    prefix: config.prefix,
    agent: args.agent,
    session: args.session,
    input: context.stdin,
    output: context.stderr,
  });
  let chatId: string | undefined;
  const onEvent = (event: AgentEvent) => {
    if (chatId === undefined) {
      if (event.kind !== "ChatStarted" || event.text !== args.text) return;
      chatId = event.chatId;
    }
    if (event.chatId !== chatId) return;
    printer.onEvent(event);
    if (event.kind === "ToolApprovalRequested") approvals.onRequest(event);
  };
  // Subscribed even with `--events none`: a tool approval is asked from its event.
  const subscription = bus.subscribe(
    sessionEventsPattern(config.prefix, args.agent, args.session),
    (message) => {
      // Only known kinds: the printer and the approval prompt need the kind's fields.
      const parsed = parseEventJson(message.data);
      if (parsed.status === "known") onEvent(parsed.event);
    },
  );
  try {
    // The subscription must be in place at the server before the chat can start.
    await bus.flush();
    let reply: BusMessage;
    try {
      reply = await requestWithRetries(bus, {
        subject: chatSubject(config.prefix, args.agent),
        // The id makes the request safe to repeat: a host answers it once per id and session, and
        // a repeat gets the stored answer (or joins the running chat) instead of a second run.
        data: JSON.stringify({ session: args.session, text: args.text, id: createRequestId() }),
        heartbeatSubject: sessionHeartbeatSubject(config.prefix, args.agent, args.session),
        signal: context.signal,
      });
    } catch (error) {
      if (context.signal.aborted) return fail("cancelled (the host may still be running the chat)", 130);
      if (error instanceof NoRespondersError) {
        return fail(
          `no agent host serves "${args.agent}" at ${url} (start one with \`agentloop serve\` or \`agentloop up\`)`,
        );
      }
      if (error instanceof HostSilentError) {
        return fail(
          `the agent host serving "${args.agent}" stopped responding (no heartbeat for ${error.silentFor}): it stopped, crashed or lost its NATS connection; the chat did not finish`,
        );
      }
      // A subject this NATS user may not use: its permissions to fix, named.
      if (error instanceof BusConfigError) return fail(describeError(error), EXIT_USER_MISTAKE);
      if (error instanceof BusTimeoutError)
        return fail(`no reply from agent "${args.agent}" within 30 minutes`);
      return fail(`the request failed: ${describeError(error)}`);
    }
    const parsed = parseChatReply(reply.data);
    if (!parsed.ok) return fail(`unreadable reply from the host: ${parsed.error.message}`);
    if (!parsed.value.ok) {
      const { code, message } = parsed.value.error;
      return fail(`${code}: ${message}`, exitCodeOfReply(code));
    }
    printer.onResult(parsed.value.result, parsed.value.usage);
    return 0;
  } finally {
    subscription.unsubscribe();
    approvals.close();
  }
}

/** How many times a chat request is sent again after its reply was lost. */
export const CHAT_RETRIES = 3;

/** A pause before asking again while no host answers (one restarting after NATS came back). */
const RETRY_PAUSE_MS = 1_000;

interface RetriedRequest {
  subject: string;
  data: string;
  heartbeatSubject: string;
  signal: AbortSignal;
}

/**
 * The chat request, sent again with the same payload (and so the same `id`) when its reply was
 * lost: the host serving it went silent — it died, or NATS restarted and the reply went out while
 * this client was away. The host answers a repeated id from what it stored, so the answer is
 * recovered, not computed twice. While repeating, a moment with no host at all is waited out;
 * when the repeats run out, the first failure is what the caller hears.
 */
async function requestWithRetries(bus: Bus, request: RetriedRequest): Promise<BusMessage> {
  let firstFailure: unknown;
  for (let attempt = 0; ; attempt++) {
    try {
      return await requestWithHeartbeat(bus, request.subject, request.data, {
        heartbeatSubject: request.heartbeatSubject,
        timeoutMs: REMOTE_CHAT_TIMEOUT_MS,
        signal: request.signal,
      });
    } catch (error) {
      const isLost = error instanceof HostSilentError;
      const isRestarting = firstFailure !== undefined && error instanceof NoRespondersError;
      if (request.signal.aborted || attempt >= CHAT_RETRIES || !(isLost || isRestarting)) {
        throw firstFailure ?? error;
      }
      firstFailure ??= error;
      if (isRestarting) await sleep(RETRY_PAUSE_MS, request.signal).catch(() => {});
    }
  }
}

function createRequestId(): string {
  return `chat-${randomUUID()}`;
}

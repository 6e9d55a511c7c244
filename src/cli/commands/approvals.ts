import { BusConfigError, BusTimeoutError, NoRespondersError } from "../../bus/bus-errors.js";
import { parseControlReply } from "../../bus/contract.js";
import { type HeldToolCallListing, listHeldToolCalls } from "../../bus/held-tool-calls.js";
import type { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { controlSubject, isValidName } from "../../bus/subjects.js";
import { describeError } from "../../errors/describe-error.js";
import { EXIT_USER_MISTAKE, exitCodeOfReply } from "../../errors/error-code.js";
import { truncateText } from "../../text/truncate-text.js";
import { type CliContext, type Command, UsageError } from "../cli-context.js";
import { connectCommandToNats } from "../command-helpers.js";

/** How long `approve` / `deny` wait for the host's reply. */
const DECISION_TIMEOUT_MS = 30_000;

/**
 * `agentloop pending [--agent A] [--json]`: every tool call waiting for approval on the NATS
 * system, whichever host holds it and whether or not its requester is still there, read from the
 * event log. One line per call (`--json`: one JSON object per line), oldest first: a call held
 * inside an `ask_agent` tree, which the log has twice (the holder's and the copy on the root's
 * session), is one line naming both.
 */
export const pendingCommand: Command = async (context) => {
  const agent = optionalName(context.flags.agent, "--agent");
  const bus = await connectCommandToNats(context, "pending");
  if (typeof bus === "number") return bus;
  try {
    const held = await readHeldCalls(context, bus, "pending", agent === undefined ? {} : { agent });
    if (typeof held === "number") return held;
    const calls = oneEntryPerCall(held);
    if (context.flags.json === true) {
      for (const call of calls) context.stdout.write(`${JSON.stringify(call)}\n`);
    } else if (calls.length === 0) {
      context.stdout.write(`no tool calls wait for approval on ${redactNatsUrl(context.config.natsUrl)}\n`);
    } else {
      const now = Date.now();
      for (const call of calls) context.stdout.write(`${formatHeldCall(call, now)}\n`);
    }
    return 0;
  } finally {
    await bus.close();
  }
};

/** `agentloop approve <agent> <session> [toolCallId] [--reason TEXT]` */
export const approveCommand: Command = (context) => decide(context, true);

/** `agentloop deny <agent> <session> [toolCallId] [--reason TEXT]` */
export const denyCommand: Command = (context) => decide(context, false);

/**
 * Sends one decision on the agent's control subject. Without a toolCallId the session's held
 * calls are looked up: exactly one is decided (bound to the arguments the log shows), several are
 * a one-line error that lists them.
 */
async function decide(context: CliContext, approved: boolean): Promise<number> {
  const name = approved ? "approve" : "deny";
  const [agent, session, toolCallId, extra] = context.positionals;
  const usage = `usage: agentloop ${name} <agent> <session> [toolCallId] [--reason TEXT]`;
  if (agent === undefined || session === undefined) {
    throw new UsageError(`${name} needs an agent and a session (${usage})`);
  }
  if (extra !== undefined)
    throw new UsageError(`${name} takes at most three arguments, got "${extra}" (${usage})`);
  if (!isValidName(agent)) throw new UsageError(`the agent must match ^[A-Za-z0-9_-]{1,64}$, got "${agent}"`);
  if (!isValidName(session))
    throw new UsageError(`the session must match ^[A-Za-z0-9_-]{1,64}$, got "${session}"`);
  const reason = context.flags.reason;
  if (reason !== undefined && (typeof reason !== "string" || reason.trim() === "")) {
    throw new UsageError("--reason needs a text");
  }

  const bus = await connectCommandToNats(context, name);
  if (typeof bus === "number") return bus;
  try {
    let call: Pick<HeldToolCallListing, "toolCallId"> & Partial<HeldToolCallListing>;
    if (toolCallId !== undefined) {
      call = { toolCallId };
    } else {
      const calls = await readHeldCalls(context, bus, name, { agent, session });
      if (typeof calls === "number") return calls;
      if (calls.length === 0) {
        context.stderr.write(`agentloop ${name}: no tool call waits for approval in ${agent}/${session}\n`);
        return 1;
      }
      if (calls.length > 1) {
        const listed = calls.map((held) => `${held.toolCallId} ${shownCall(held, 60)}`).join(", ");
        context.stderr.write(
          `agentloop ${name}: ${calls.length} tool calls wait in ${agent}/${session}, name one: ${listed}\n`,
        );
        return EXIT_USER_MISTAKE;
      }
      call = calls[0]!;
    }
    const payload = {
      session,
      command: name,
      toolCallId: call.toolCallId,
      // Bound to what the log showed: a call whose arguments differ is refused, not decided.
      ...(call.arguments === undefined ? {} : { arguments: call.arguments }),
      ...(typeof reason === "string" ? { reason } : {}),
    };
    let data: string;
    try {
      const reply = await bus.request(controlSubject(context.config.prefix, agent), JSON.stringify(payload), {
        timeoutMs: DECISION_TIMEOUT_MS,
      });
      data = reply.data;
    } catch (error) {
      return failRequest(context, name, agent, error);
    }
    const parsed = parseControlReply(data);
    if (!parsed.ok) {
      context.stderr.write(`agentloop ${name}: unreadable reply from the host: ${parsed.error.message}\n`);
      return 1;
    }
    if (!parsed.value.ok) {
      const { code, message } = parsed.value.error;
      context.stderr.write(`agentloop ${name}: ${code}: ${message}\n`);
      return exitCodeOfReply(code);
    }
    const what = call.toolName === undefined ? call.toolCallId : `${call.toolCallId} ${shownCall(call, 200)}`;
    context.stdout.write(`${approved ? "approved" : "denied"} ${what} in ${agent}/${session}\n`);
    return 0;
  } finally {
    await bus.close();
  }
}

/**
 * The held calls with each call once: the copy of a call on its tree's root session is left out
 * when the holder's own entry is listed (that one names the root); a copy whose holder is not
 * listed (`--agent` left it out) stays, naming the holder. Order is kept.
 */
export function oneEntryPerCall(calls: readonly HeldToolCallListing[]): HeldToolCallListing[] {
  const keyOf = (agent: string, session: string, chatId: string, toolCallId: string) =>
    JSON.stringify([agent, session, chatId, toolCallId]);
  const holders = new Set(calls.map((call) => keyOf(call.agent, call.session, call.chatId, call.toolCallId)));
  return calls.filter(
    (call) =>
      call.heldBy === undefined ||
      !holders.has(keyOf(call.heldBy.agent, call.heldBy.session, call.heldBy.chatId, call.toolCallId)),
  );
}

/**
 * `assistant/s1  call_1  current_time({})  waiting 2m 5s  host h1`; a call of an asked chat ends
 * with `root lead/s1` (it may be decided there too), a root's copy with `held by keeper/lead-s1`.
 */
export function formatHeldCall(call: HeldToolCallListing, now: number): string {
  const since = Date.parse(call.requestedAt);
  const isRootElsewhere =
    call.root !== undefined && (call.root.agent !== call.agent || call.root.session !== call.session);
  return [
    `${call.agent}/${call.session}`,
    call.toolCallId,
    shownCall(call, 200),
    Number.isNaN(since) ? "waiting" : `waiting ${elapsed(now - since)}`,
    ...(call.heldBy === undefined ? [] : [`held by ${call.heldBy.agent}/${call.heldBy.session}`]),
    ...(call.root === undefined || !isRootElsewhere ? [] : [`root ${call.root.agent}/${call.root.session}`]),
    ...(call.host === undefined ? [] : [`host ${call.host}`]),
  ].join("  ");
}

function shownCall(call: Partial<HeldToolCallListing>, maxArguments: number): string {
  return `${call.toolName ?? "?"}(${truncateText(call.arguments ?? "", maxArguments)})`;
}

function elapsed(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ${seconds % 60}s`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h ${minutes % 60}m`;
  return `${Math.floor(hours / 24)}d`;
}

async function readHeldCalls(
  context: CliContext,
  bus: NatsBus,
  command: string,
  filter: { agent?: string; session?: string },
): Promise<HeldToolCallListing[] | number> {
  try {
    return await listHeldToolCalls(bus.connection, {
      prefix: context.config.prefix,
      ...filter,
      signal: context.signal,
    });
  } catch (error) {
    if (context.signal.aborted) return 130;
    context.stderr.write(
      `agentloop ${command}: cannot read the event log (JetStream) on ${redactNatsUrl(context.config.natsUrl)}: ${describeError(error)}\n`,
    );
    return 1;
  }
}

function failRequest(context: CliContext, command: string, agent: string, error: unknown): number {
  const url = redactNatsUrl(context.config.natsUrl);
  let line: string;
  let code = 1;
  if (error instanceof NoRespondersError) {
    line = `no agent host serves "${agent}" at ${url} (start one with \`agentloop serve\` or \`agentloop up\`)`;
  } else if (error instanceof BusTimeoutError) {
    line = `no reply from the host serving "${agent}" within ${DECISION_TIMEOUT_MS / 1000}s`;
  } else if (error instanceof BusConfigError) {
    line = describeError(error);
    code = EXIT_USER_MISTAKE;
  } else {
    line = `the request failed: ${describeError(error)}`;
  }
  context.stderr.write(`agentloop ${command}: ${line}\n`);
  return code;
}

function optionalName(value: CliContext["flags"][string], flag: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || !isValidName(value)) {
    throw new UsageError(`${flag} must match ^[A-Za-z0-9_-]{1,64}$, got "${String(value)}"`);
  }
  return value;
}

import { createInterface, type Interface } from "node:readline";
import type { Bus } from "../../bus/bus.js";
import { parseControlReply } from "../../bus/contract.js";
import { controlSubject } from "../../bus/subjects.js";
import type { EventOf } from "../../events/types.js";
import { truncateText } from "../../text/truncate-text.js";

export interface ApprovalPromptParams {
  bus: Bus;
  prefix: string;
  agent: string;
  session: string;
  /** Where the answers come from (a terminal, or a pipe: one `y` / `n` line per request). */
  input: NodeJS.ReadableStream | undefined;
  /** Where the questions go (stderr: stdout carries the chat's output). */
  output: NodeJS.WritableStream;
}

/**
 * Remote `chat`'s side of tool approval: each ToolApprovalRequested of its chat is asked
 * as `approve current_time({})? [y/N]`, one line of input answering it (`y` or `yes` approves,
 * anything else denies), and the answer goes to the host as `approve` / `deny` on the control
 * subject, bound to the arguments shown. Without input (none, or at its end) it says how to answer
 * from elsewhere and keeps waiting.
 */
export function createApprovalPrompt(params: ApprovalPromptParams) {
  const { bus, prefix, agent, session, output } = params;
  let lines: Interface | undefined;
  let hasEnded = params.input === undefined;
  const answers: string[] = [];
  const waiting: ((line: string | undefined) => void)[] = [];
  let queue: Promise<void> = Promise.resolve();

  const nextLine = (): Promise<string | undefined> => {
    if (lines === undefined && params.input !== undefined && !hasEnded) {
      // Opened at the first request only: a chat that needs no approval never touches stdin.
      lines = createInterface({ input: params.input, terminal: false });
      lines.on("line", (line) => {
        const waiter = waiting.shift();
        if (waiter) waiter(line);
        else answers.push(line);
      });
      lines.on("close", () => {
        hasEnded = true;
        for (const waiter of waiting.splice(0)) waiter(undefined);
      });
    }
    const ready = answers.shift();
    if (ready !== undefined) return Promise.resolve(ready);
    if (hasEnded) return Promise.resolve(undefined);
    return new Promise((resolve) => waiting.push(resolve));
  };

  const ask = async (request: EventOf<"ToolApprovalRequested">) => {
    const call = `${request.toolName}(${truncateText(request.arguments, 200)})`;
    output.write(`approve ${call}? [y/N] `);
    const line = await nextLine();
    if (line === undefined) {
      output.write(
        `\nagentloop: ${call} waits for approval: run \`agentloop approve ${agent} ${session} ${request.toolCallId}\` (or deny), or send {"session":"${session}","command":"approve","toolCallId":"${request.toolCallId}"} to ${controlSubject(prefix, agent)}\n`,
      );
      return;
    }
    const approved = /^\s*y(es)?\s*$/i.test(line);
    const payload = {
      session,
      command: approved ? "approve" : "deny",
      toolCallId: request.toolCallId,
      arguments: request.arguments,
      ...(approved ? {} : { reason: "denied at the terminal" }),
    };
    try {
      const reply = await bus.request(controlSubject(prefix, agent), JSON.stringify(payload), {
        timeoutMs: 30_000,
      });
      const parsed = parseControlReply(reply.data);
      if (parsed.ok && !parsed.value.ok) {
        output.write(`agentloop: ${parsed.value.error.code}: ${parsed.value.error.message}\n`);
      }
    } catch (error) {
      output.write(`agentloop: the ${payload.command} was not delivered: ${String(error)}\n`);
    }
  };

  return {
    /** Asks about one request (one at a time, in the order they came). */
    onRequest(request: EventOf<"ToolApprovalRequested">): void {
      queue = queue.then(() => ask(request));
    },
    /** Lets go of the input (the chat is over). */
    close(): void {
      lines?.close();
      (params.input as { pause?: () => void } | undefined)?.pause?.();
    },
  };
}

import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { LocalBus } from "../../src/bus/local-bus.js";
import { chatSubject, controlSubject, sessionEventsPattern } from "../../src/bus/subjects.js";
import { createEventLogger, followEvents } from "../../src/cli/commands/tail.js";
import type { AgentEvent, EventOf } from "../../src/events/types.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedStep } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { waitUntil } from "../support/agent-harness.js";

/**
 * `tail` on the root session of an agent tree shows the approvals its children need: the root's
 * subscriber gets `ToolApprovalRequested` naming the chat that holds the call, decides it through
 * the root, and sees it resolved, without following the child's session.
 */

const PREFIX = "tailtree";
const hosts: RunningHost[] = [];
const buses: LocalBus[] = [];
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.close();
  for (const bus of buses.splice(0)) await bus.close();
});

const openVault = defineTool({
  name: "open_vault",
  description: "Opens a vault door.",
  parameters: z.object({ door: z.number() }),
  needsApproval: true,
  execute: ({ door }) => `door ${door} open`,
});

/** The tool result the model got last, if the last message is one. */
function lastResult(messages: readonly { role: string; content: unknown }[]): string | undefined {
  const last = messages.at(-1);
  return last?.role === "tool" ? textOf(last.content as string) : undefined;
}

describe("tail on the root of an agent tree", () => {
  it("prints a child's approval request naming the child, then its decision", async () => {
    const bus = new LocalBus();
    buses.push(bus);
    const lead = new ScriptedBackend((request): ScriptedStep => {
      const result = lastResult(request.messages);
      if (result !== undefined) return { text: `vault says ${result}` };
      return { toolCalls: [{ name: "ask_agent", arguments: { agent: "keeper", message: "open door 7" } }] };
    });
    const keeper = new ScriptedBackend((request): ScriptedStep => {
      const result = lastResult(request.messages);
      if (result !== undefined) return { text: result };
      return { toolCalls: [{ name: "open_vault", arguments: { door: 7 } }] };
    });
    hosts.push(
      await startHost({
        bus,
        prefix: PREFIX,
        agents: [
          { name: "lead", tools: ["ask_agent"], backend: lead },
          { name: "keeper", tools: [openVault], backend: keeper },
        ],
      }),
    );

    let printed = "";
    const stdout = {
      write: (chunk: string) => {
        printed += chunk;
        return true;
      },
      isTTY: false,
    } as unknown as NodeJS.WritableStream;
    const following = new AbortController();
    // What `agentloop tail agentloop.events.lead.s1.>` does: the root session only.
    const tail = followEvents({
      bus,
      prefix: PREFIX,
      filter: sessionEventsPattern(PREFIX, "lead", "s1"),
      logger: createEventLogger({ stdout }),
      signal: following.signal,
    });
    const rootEvents: AgentEvent[] = [];
    bus.subscribe(sessionEventsPattern(PREFIX, "lead", "s1"), (message) => {
      rootEvents.push(JSON.parse(message.data) as AgentEvent);
    });

    const reply = bus.request(chatSubject(PREFIX, "lead"), JSON.stringify({ session: "s1", text: "go" }), {
      timeoutMs: 60_000,
    });
    await waitUntil(() => rootEvents.some((event) => event.kind === "ToolApprovalRequested"), 30_000);
    const asked = rootEvents.find(
      (event): event is EventOf<"ToolApprovalRequested"> => event.kind === "ToolApprovalRequested",
    )!;
    expect(asked.heldBy).toMatchObject({ agent: "keeper", session: "lead-s1" });
    await waitUntil(() => printed.includes("approve open_vault"), 30_000);
    expect(printed).toMatch(
      /lead\/s1 #\d+ i1 ToolApprovalRequested approve open_vault\(\{"door":7\}\)\? \S+ held by keeper\/lead-s1/,
    );

    const decided = await bus.request(
      controlSubject(PREFIX, "lead"),
      JSON.stringify({ session: "s1", command: "approve", toolCallId: asked.toolCallId }),
    );
    expect(JSON.parse(decided.data)).toEqual({ ok: true });
    expect(JSON.parse((await reply).data)).toMatchObject({ ok: true, result: "vault says door 7 open" });
    await waitUntil(() => printed.includes("ChatCompleted"), 30_000);
    expect(printed).toMatch(
      /lead\/s1 #\d+ i1 ToolApprovalResolved open_vault approved \S+ held by keeper\/lead-s1/,
    );
    // Only the root session was followed: the child's own events are not in the output.
    expect(printed).not.toContain("keeper/lead-s1 #");

    following.abort();
    await tail;
  });
});

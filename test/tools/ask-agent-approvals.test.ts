import { afterEach, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { textOf } from "../../src/llm/types.js";
import type { ScriptedRequest, ScriptedStep } from "../../src/testing/index.js";
import { createAskAgentToolSet } from "../../src/tools/ask-agent.js";
import { ToolError } from "../../src/tools/tool-errors.js";
import { definition, type HostFixture, lastUserText, startHostFixture } from "../host/host-fixture.js";
import { createTestToolContext } from "./tool-context.js";

/**
 * Regression: an agent whose `shell` needs approval asked (`ask_agent`) an agent with `shell` and
 * no approval, and the command ran unapproved. The request now carries the tools needing approval
 * in the caller's chain (`approvalRequired`), and the asked session's calls to them need approval
 * too; a protocol agent, which cannot be held to that, may not be asked from such a chain.
 */

/** Asked `ask <agent>: <text>`, calls ask_agent; after a tool result, answers with it. */
function delegatingModel(name: string) {
  return (request: ScriptedRequest): ScriptedStep => {
    const last = request.messages.at(-1);
    if (last?.role === "tool") return { text: `${name} got: ${textOf(last.content)}` };
    const ask = /^ask (\w+): (.*)$/.exec(lastUserText(request));
    if (ask) return { toolCalls: [{ name: "ask_agent", arguments: { agent: ask[1], message: ask[2] } }] };
    return { text: `${name}: nothing to do` };
  };
}

/** Runs every message it gets as a shell command, then answers with the result. */
function shellModel(request: ScriptedRequest): ScriptedStep {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { text: `ops did: ${textOf(last.content)}` };
  return { toolCalls: [{ name: "shell", arguments: { command: lastUserText(request) } }] };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startAgents(): Promise<HostFixture> {
  const bus = new LocalBus();
  cleanups.push(() => bus.close());
  const fixture = await startHostFixture(bus, {
    definitions: [
      definition("front", { tools: ["ask_agent", "shell"], needsApproval: ["shell"] }),
      definition("ops", { tools: ["shell"] }),
    ],
    scripts: { front: delegatingModel("front"), ops: shellModel },
  });
  cleanups.push(() => fixture.close());
  return fixture;
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for a condition");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("approval across ask_agent", () => {
  it("an approval-free agent asked by an agent whose shell needs approval waits for approval", async () => {
    const fixture = await startAgents();
    const reply = fixture.request("front", "chat", { session: "s1", text: "ask ops: echo ran" }, 30_000);
    const opsEvents = () =>
      fixture.events.filter(({ subject }) => subject.startsWith(`${fixture.prefix}.events.ops.front-s1.`));
    await waitFor(() => opsEvents().some(({ event }) => event.kind === "ToolApprovalRequested"));
    const requested = opsEvents().find(({ event }) => event.kind === "ToolApprovalRequested")!.event;
    expect(requested).toMatchObject({ toolName: "shell", arguments: '{"command":"echo ran"}' });
    expect(opsEvents().some(({ event }) => event.kind === "ToolCallStarted")).toBe(false);

    const toolCallId = (requested as { toolCallId: string }).toolCallId;
    expect(
      await fixture.request("ops", "control", { session: "front-s1", command: "approve", toolCallId }),
    ).toEqual({ ok: true });
    expect(await reply).toMatchObject({ ok: true, result: "front got: ops did: exit code: 0\nran\n" });
  });

  it("a request naming shell in approvalRequired makes the session ask; one naming none does not", async () => {
    const fixture = await startAgents();
    expect(
      await fixture.request("ops", "chat", { session: "s2", text: "echo direct", approvalRequired: [] }),
    ).toMatchObject({ ok: true, result: "ops did: exit code: 0\ndirect\n" });
    const guarded = fixture.request("ops", "chat", {
      session: "s3",
      text: "echo guarded",
      approvalRequired: ["shell"],
    });
    await waitFor(() =>
      fixture.events.some(
        ({ subject, event }) =>
          subject.startsWith(`${fixture.prefix}.events.ops.s3.`) && event.kind === "ToolApprovalRequested",
      ),
    );
    const requested = fixture.events.find(
      ({ subject, event }) =>
        subject.startsWith(`${fixture.prefix}.events.ops.s3.`) && event.kind === "ToolApprovalRequested",
    )!.event as { toolCallId: string };
    expect(
      await fixture.request("ops", "control", {
        session: "s3",
        command: "deny",
        toolCallId: requested.toolCallId,
        reason: "no",
      }),
    ).toEqual({ ok: true });
    expect(await guarded).toMatchObject({ ok: true, result: 'ops did: {"error":"denied","reason":"no"}' });
  });

  it("refuses a malformed approvalRequired with bad_request", async () => {
    const fixture = await startAgents();
    for (const approvalRequired of ["shell", [5], ["two words"]]) {
      expect(
        await fixture.request("ops", "chat", { session: "s4", text: "echo x", approvalRequired }),
      ).toMatchObject({
        ok: false,
        error: { code: "bad_request", message: expect.stringContaining("approvalRequired") },
      });
    }
  });

  it("sends the chain's approvals with the request, and asks no protocol agent from such a chain", async () => {
    const bus = new LocalBus();
    cleanups.push(() => bus.close());
    const received: unknown[] = [];
    bus.subscribe("acme.agents.helper.chat", (message) => {
      received.push(JSON.parse(message.data));
      bus.respond(
        message,
        JSON.stringify({
          ok: true,
          session: "x",
          result: "fine",
          usage: { prompt: 0, completion: 0, total: 0, cached: 0 },
        }),
      );
    });
    const toolSet = createAskAgentToolSet({ bus, prefix: "acme", agent: "bot" });
    const context = createTestToolContext({
      agent: "bot",
      session: "s9",
      approvalRequired: ["deploy", "shell"],
    });
    const ask = (args: object) =>
      toolSet.invoke({ id: "c1", name: "ask_agent", arguments: JSON.stringify(args) }, context);
    expect(await ask({ agent: "helper", message: "hi" })).toBe("fine");
    expect(received).toEqual([
      { session: "bot-s9", text: "hi", depth: 1, approvalRequired: ["deploy", "shell"] },
    ]);
    const refused = ask({ target: { agent: "other" }, message: "hi" });
    await expect(refused).rejects.toBeInstanceOf(ToolError);
    await expect(refused).rejects.toThrow(/deploy, shell need approval/);
  });
});

import { describe, expect, it } from "vitest";
import { createActor, toPromise } from "xstate";
import { boundMachines } from "../../src/agent/bound-machines.js";
import { createSessionDeps, type SessionDeps, withSessionDeps } from "../../src/agent/session-deps.js";
import { createEventEmitter } from "../../src/events/event-emitter.js";
import type { Message } from "../../src/llm/types.js";
import { scriptedModel } from "../../src/testing/index.js";
import { NO_SECRETS } from "../../src/text/secret-redactor.js";

/** A session's dependencies reach the machines as input, not through a registry. */

function sessionDeps(overrides: Partial<SessionDeps> = {}): SessionDeps {
  return createSessionDeps({
    llm: scriptedModel([]),
    events: createEventEmitter({ agent: "a", session: "s", listeners: [] }),
    history: undefined,
    toolSets: [],
    limitToolCall: (task) => task(),
    toolContext: () => ({ agent: "a", session: "s", depth: 0 }),
    recordMessage: () => {},
    needsApproval: () => false,
    announceApprovals: () => {},
    redactor: NO_SECRETS,
    now: () => 0,
    ...overrides,
  });
}

const chatInput = {
  userText: "hi",
  injections: [],
  systemPrompt: "sys",
  history: [] as Message[],
  options: { model: "m" },
  tools: [],
  maxIterations: 2,
  tokenLimit: 1000,
  contextCompactRatio: 0.7,
  tokenUsed: 0,
};

describe("explicit session dependencies", () => {
  it("a bound machine started without deps fails at its first step, saying what is missing", async () => {
    const actor = createActor(boundMachines.iteration, {
      input: {
        messages: [{ role: "user", content: "hi" }],
        options: { model: "m" },
        iteration: 1,
        isFinal: false,
      },
    });
    const failure = toPromise(actor).catch((error: unknown) => error);
    actor.start();
    const error = await failure;
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(
      /iteration machine was started without its session's dependencies/,
    );
    expect((error as Error).message).toMatch(/input\.deps/);
  });

  it("a chat started with deps answers through the deps' model client and events", async () => {
    const seen: string[] = [];
    const events = createEventEmitter({
      agent: "a",
      session: "s",
      listeners: [(event) => seen.push(event.kind)],
    });
    const actor = createActor(boundMachines.chat, {
      input: { ...chatInput, deps: sessionDeps({ llm: scriptedModel([{ text: "hello" }]), events }) },
    });
    actor.start();
    const output = await toPromise(actor);
    expect(output).toMatchObject({ status: "done", result: "hello" });
    expect(seen).toContain("ModelRequest");
    expect(seen).toContain("ChatCompleted");
  });

  it("deps stay out of a persisted snapshot's JSON, even when they lead into circular objects, and come back on restore", () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const deps = sessionDeps({ toolSets: [circular as never] });
    const actor = createActor(boundMachines.compaction, {
      input: { messages: [], systemPrompt: "sys", options: { model: "m" }, deps },
    });
    const persisted = actor.getPersistedSnapshot() as Record<string, unknown>;
    const json = JSON.parse(JSON.stringify(persisted)) as { context: Record<string, unknown> };
    expect(json.context).not.toHaveProperty("deps");
    expect(json.context.systemPrompt).toBe("sys");
    const restored = withSessionDeps(json, deps) as { context: Record<string, unknown> };
    expect(restored.context.deps).toBe(deps);
  });
});

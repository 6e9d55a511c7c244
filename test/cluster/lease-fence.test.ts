import { describe, expect, it } from "vitest";
import { createAgent } from "../../src/agent/create-agent.js";
import { fenceHistory, fenceLlm, type LeaseFence, LeaseLostError } from "../../src/cluster/lease-fence.js";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import type { AgentEvent } from "../../src/events/types.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import type { GenerateRequest, StreamSink } from "../../src/llm/types.js";
import { ScriptedBackend, scriptedModel } from "../../src/testing/index.js";

/**
 * The lease fence on the model client: a session's model request is sent only while this host holds
 * the session's lease, and so is every retry of it. A lease lost while a failed attempt waits out
 * its backoff must stop the retry from being sent: another host may already run the session.
 */

/** A fence the test takes away by hand. */
function manualFence(): LeaseFence & { lose(): void } {
  let isLost = false;
  return {
    epoch: 3,
    assertHeld() {
      if (isLost) throw new LeaseLostError("this host no longer owns session bot/s1: taken over", 3);
    },
    lose() {
      isLost = true;
    },
  };
}

const request: GenerateRequest = {
  messages: [{ role: "user", content: "hello" }],
  options: { model: "test-model" },
};

const sink: StreamSink = {
  onTextDelta: () => {},
  onReasoningDelta: () => {},
  onReset: () => {},
  onCompleted: () => {},
};

/** A client whose first attempt fails retryably and whose backoff loses the lease. */
function clientLosingTheLeaseInTheBackoff() {
  const fence = manualFence();
  const backend = new ScriptedBackend([{ fault: "server_error" }, { text: "sent by a host that lost it" }]);
  const delays: number[] = [];
  const client = new RetryingLlmClient({
    backend,
    sleep: async (ms) => {
      delays.push(ms);
      fence.lose();
    },
  });
  return { llm: fenceLlm(client, fence), backend, delays };
}

describe("fenceLlm", () => {
  it("checks the fence again before a retry: a lease lost during the backoff stops generate", async () => {
    const { llm, backend, delays } = clientLosingTheLeaseInTheBackoff();
    await expect(llm.generate(request)).rejects.toBeInstanceOf(LeaseLostError);
    // The backoff ran, then the retry was refused before it reached the provider.
    expect(delays).toHaveLength(1);
    expect(backend.requests).toHaveLength(1);
  });

  it("checks the fence again before a stream is re-opened", async () => {
    const { llm, backend, delays } = clientLosingTheLeaseInTheBackoff();
    await expect(llm.generateStream(request, sink)).rejects.toThrow(/no longer owns session bot\/s1/);
    expect(delays).toHaveLength(1);
    expect(backend.requests).toHaveLength(1);
  });

  it("lets retries through while the lease is held, and refuses a first attempt once it is gone", async () => {
    const fence = manualFence();
    const backend = new ScriptedBackend([{ fault: "rate_limit" }, { text: "second try" }]);
    const llm = fenceLlm(new RetryingLlmClient({ backend, sleep: async () => {} }), fence);
    expect((await llm.generateStream(request, sink)).content).toBe("second try");
    expect(backend.requests).toHaveLength(2);

    fence.lose();
    await expect(llm.generate(request)).rejects.toBeInstanceOf(LeaseLostError);
    expect(backend.requests).toHaveLength(2);
  });

  it("keeps a request's own beforeAttempt, after the fence", async () => {
    const fence = manualFence();
    const backend = new ScriptedBackend([{ fault: "server_error" }, { text: "ok" }]);
    const llm = fenceLlm(new RetryingLlmClient({ backend, sleep: async () => {} }), fence);
    let attempts = 0;
    const response = await llm.generate({ ...request, beforeAttempt: () => void attempts++ });
    expect(response.content).toBe("ok");
    expect(attempts).toBe(2);
  });

  it("a chat whose lease is lost between two attempts fails without sending the retry", async () => {
    const fence = manualFence();
    const events: AgentEvent[] = [];
    const model = scriptedModel([{ fault: "server_error" }, { text: "never sent" }], {
      // Called between the failed attempt and its backoff: the lease is taken over right then.
      onRetry: () => fence.lose(),
    });
    const agent = await createAgent({
      name: "bot",
      session: "s1",
      llm: fenceLlm(model, fence),
      model: "scripted-model",
      toolSets: [],
      options: { onLog: (event) => events.push(event) },
    });
    await expect(agent.chat("hello")).rejects.toThrow(/no longer owns session bot\/s1/);
    expect(model.requests).toHaveLength(1);
    expect(events.filter((event) => event.kind === "ModelResponse")).toEqual([]);
    expect(events.filter((event) => event.kind === "ChatFailed")).toHaveLength(1);
  });
});

describe("fenceHistory", () => {
  it("refuses writes once the lease is lost, lets reads through, and has the optional parts its history has", async () => {
    const fence = manualFence();
    const inner = new InMemoryContextHistory();
    const history = fenceHistory(inner, fence);
    await history.append([{ role: "user", content: "before" }]);
    // The parts the wrapped history lacks stay absent: callers test for them.
    expect(history.loadSeq === undefined).toBe(inner.loadSeq === undefined);
    expect(history.saveSeq === undefined).toBe(inner.saveSeq === undefined);
    expect(history.takePendingApproval === undefined).toBe(inner.takePendingApproval === undefined);
    const bare = fenceHistory(
      {
        restore: async () => [],
        append: async () => {},
        replace: async () => {},
        clear: async () => {},
      },
      fence,
    );
    expect(bare.loadSeq).toBeUndefined();
    expect(bare.savePendingApproval).toBeUndefined();
    fence.lose();
    await expect(history.append([{ role: "user", content: "after" }])).rejects.toBeInstanceOf(LeaseLostError);
    await expect(history.replace([])).rejects.toBeInstanceOf(LeaseLostError);
    await expect(history.clear()).rejects.toBeInstanceOf(LeaseLostError);
    expect(await history.restore()).toEqual([{ role: "user", content: "before" }]);
    await expect(history.saveSeq?.(5)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await history.loadSeq?.()).toBe(0);
  });
});

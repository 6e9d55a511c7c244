import { describe, expect, it } from "vitest";
import { turn } from "../../src/testing/index.js";
import {
  HOSTED_PROVIDERS,
  type HostedProvider,
  type ProviderReply,
  parseJsonl,
  textTurn,
} from "../support/cli.js";
import { useLocalChat } from "../support/local-chat.js";

/**
 * When the CLI compacts: the ratio is the LAST
 * request's prompt + completion tokens over the window (never the sum over a tool loop), compared
 * with ≥ 0.7; the window defaults to the model's known one, else 128,000; the env variable works.
 */

const localChat = useLocalChat();

/** A chat whose events come as JSONL, with the compaction phases it went through. */
async function chat(
  provider: HostedProvider,
  script: readonly ProviderReply[],
  args: readonly string[],
  env: Record<string, string> = {},
) {
  const { run, bodies } = await localChat(provider, script, ["--events", "jsonl", ...args], env);
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
  const { events, last } = parseJsonl(run.stdout);
  const phases = events.flatMap((event) => (event.kind === "ContextCompaction" ? [event.phase] : []));
  return { run, bodies, events, last, phases };
}

const TOOL_TURN = (prompt: number, completion: number) =>
  turn({
    toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }],
    usage: { prompt, completion },
  });

describe.each(HOSTED_PROVIDERS)("the compaction threshold (--provider %s)", (provider) => {
  it("a tool loop whose sum is over the window but whose last request is at 69% does not compact", async () => {
    const { bodies, phases, last, events } = await chat(
      provider,
      [TOOL_TURN(90, 5), turn({ text: "Done.", usage: { prompt: 60, completion: 9 } })],
      ["--context-window", "100", "time?"],
    );
    expect(bodies).toHaveLength(2);
    expect(phases).toEqual([]);
    expect(last.usage).toMatchObject({ prompt: 150, completion: 14, total: 164 });
    expect(events.find((event) => event.kind === "ChatCompleted")).toMatchObject({ tokenUsed: 69 });
  });

  it("exactly 70% of the window compacts", async () => {
    const { bodies, phases, last } = await chat(
      provider,
      [turn({ text: "Done.", usage: { prompt: 60, completion: 10 } }), textTurn("Summary.")],
      ["--context-window", "100", "hi"],
    );
    expect(bodies).toHaveLength(2);
    expect(phases).toEqual(["started", "completed"]);
    expect(last.result).toBe("Done.");
  });

  it("AGENTLOOP_CONTEXT_WINDOW sets the window when the flag is absent; the flag wins over it", async () => {
    const usage = { prompt: 60, completion: 10 };
    const fromEnv = await chat(provider, [turn({ text: "A", usage }), textTurn("Summary.")], ["hi"], {
      AGENTLOOP_CONTEXT_WINDOW: "100",
    });
    expect(fromEnv.phases).toEqual(["started", "completed"]);
    const flagWins = await chat(provider, [turn({ text: "A", usage })], ["--context-window", "1000", "hi"], {
      AGENTLOOP_CONTEXT_WINDOW: "100",
    });
    expect(flagWins.phases).toEqual([]);
    expect(flagWins.bodies).toHaveLength(1);
  });

  it("the default window is the model's known one, else 128,000", async () => {
    // 100,000 tokens: 78% of 128,000 (compacts), 50% of a 200,000 Claude window (does not).
    const usage = { prompt: 99_000, completion: 1_000 };
    const unknownModel = await chat(
      provider,
      [turn({ text: "A", usage }), textTurn("Summary.")],
      ["--model", "my-local-model", "hi"],
    );
    expect(unknownModel.phases).toEqual(["started", "completed"]);
    const knownModel = provider === "anthropic" ? "claude-sonnet-4-5" : "gpt-4.1-mini";
    const known = await chat(provider, [turn({ text: "A", usage })], ["--model", knownModel, "hi"]);
    expect(known.phases).toEqual([]);
  });
});

describe("anthropic prompt-cache tokens count toward the context", () => {
  it("input_tokens + cache_read_input_tokens + output reaching 70% compacts", async () => {
    const { phases, last } = await chat(
      "anthropic",
      [turn({ text: "Cached.", usage: { prompt: 10, completion: 10, cached: 50 } }), textTurn("Summary.")],
      ["--context-window", "100", "hi"],
    );
    expect(phases).toEqual(["started", "completed"]);
    expect(last.usage.cached).toBeGreaterThanOrEqual(50);
  });
});

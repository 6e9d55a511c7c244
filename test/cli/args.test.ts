import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/cli-context.js";
import { parseArgs } from "../../src/cli/parse-args.js";
import {
  DEFAULT_CONTEXT_WINDOW,
  DEFAULT_MODELS,
  resolveRuntimeConfig,
} from "../../src/config/runtime-config.js";
import { ConfigurationError } from "../../src/llm/configuration-error.js";

const KNOWN = { provider: "string", local: "boolean", events: "string", session: "string" } as const;

describe("parseArgs", () => {
  it("splits the command, positionals and flags in both --name value and --name=value forms", () => {
    expect(
      parseArgs(["chat", "--local", "--events=jsonl", "--session", "s1", "hello", "world"], KNOWN),
    ).toEqual({
      command: "chat",
      positionals: ["hello", "world"],
      flags: { local: true, events: "jsonl", session: "s1" },
    });
  });

  it("treats everything after -- as positionals, flags included", () => {
    const parsed = parseArgs(["chat", "--", "--local", "-x"], KNOWN);
    expect(parsed.positionals).toEqual(["--local", "-x"]);
    expect(parsed.flags).toEqual({});
  });

  it("accepts a value that starts with a single dash (a negative number is the caller's to reject)", () => {
    expect(parseArgs(["chat", "--session", "-1"], KNOWN).flags.session).toBe("-1");
  });

  it.each([
    [["chat", "--nope"], "unknown option --nope"],
    [["chat", "-x"], "unknown option -x"],
    [["chat", "--session"], "--session needs a value"],
    [["chat", "--session", "--local"], "--session needs a value"],
    [["chat", "--local=yes"], "--local takes no value"],
  ])("%j is a UsageError: %s", (argv, message) => {
    expect(() => parseArgs(argv, KNOWN)).toThrow(new UsageError(message));
  });
});

describe("resolveRuntimeConfig", () => {
  it("without a provider or a key the provider is demo, with the defaults", () => {
    expect(resolveRuntimeConfig({}, {})).toEqual({
      provider: "demo",
      model: DEFAULT_MODELS.demo,
      contextWindow: DEFAULT_CONTEXT_WINDOW,
      natsUrl: "nats://127.0.0.1:4222",
      prefix: "agentloop",
    });
  });

  it("picks the provider by key: anthropic first, then openai-chat", () => {
    expect(resolveRuntimeConfig({}, { OPENAI_API_KEY: "k" }).provider).toBe("openai-chat");
    expect(resolveRuntimeConfig({}, { OPENAI_API_KEY: "k", ANTHROPIC_API_KEY: "k" }).provider).toBe(
      "anthropic",
    );
  });

  it("flags win over the environment", () => {
    const config = resolveRuntimeConfig(
      {
        provider: "openai-responses",
        model: "m-flag",
        "base-url": "http://flag",
        "max-iterations": "3",
        "context-window": "500",
      },
      {
        AGENTLOOP_PROVIDER: "anthropic",
        AGENTLOOP_MODEL: "m-env",
        OPENAI_BASE_URL: "http://env",
        OPENAI_API_KEY: "key",
        AGENTLOOP_CONTEXT_WINDOW: "900",
      },
    );
    expect(config).toMatchObject({
      provider: "openai-responses",
      model: "m-flag",
      baseUrl: "http://flag",
      apiKey: "key",
      maxIterations: 3,
      contextWindow: 500,
    });
  });

  it("reads the environment when no flag is given", () => {
    const config = resolveRuntimeConfig(
      {},
      {
        AGENTLOOP_PROVIDER: "anthropic",
        AGENTLOOP_MODEL: "claude-x",
        ANTHROPIC_BASE_URL: "http://anthropic.local",
        AGENTLOOP_CONTEXT_WINDOW: "1234",
        AGENTLOOP_DB: "/tmp/x.db",
        NATS_URL: "nats://elsewhere:4222",
      },
    );
    expect(config).toMatchObject({
      provider: "anthropic",
      model: "claude-x",
      baseUrl: "http://anthropic.local",
      contextWindow: 1234,
      db: "/tmp/x.db",
      natsUrl: "nats://elsewhere:4222",
    });
  });

  it("the context window defaults to the model's known window, else 128,000", () => {
    expect(resolveRuntimeConfig({ provider: "anthropic" }, {}).contextWindow).toBe(200_000);
    expect(resolveRuntimeConfig({ provider: "openai-chat", model: "my-local-model" }, {}).contextWindow).toBe(
      128_000,
    );
  });

  it.each([
    [{ "max-iterations": "0" }, /--max-iterations must be a positive integer, got "0"/],
    [{ "max-iterations": "two" }, /--max-iterations must be a positive integer/],
    [{ "max-iterations": "1.5" }, /--max-iterations must be a positive integer/],
    [{ "context-window": "-5" }, /--context-window must be a positive integer/],
    [{ "reasoning-effort": "extreme" }, /--reasoning-effort must be low, medium or high, got "extreme"/],
    [{ prefix: "a b" }, /--prefix must be NATS subject tokens/],
  ])("%j is a UsageError", (flags, message) => {
    expect(() => resolveRuntimeConfig(flags, {})).toThrow(UsageError);
    expect(() => resolveRuntimeConfig(flags, {})).toThrow(message);
  });

  it("an unknown provider is a ConfigurationError naming the choices", () => {
    expect(() => resolveRuntimeConfig({ provider: "gemini" }, {})).toThrow(ConfigurationError);
    expect(() => resolveRuntimeConfig({}, { AGENTLOOP_PROVIDER: "gemini" })).toThrow(/AGENTLOOP_PROVIDER/);
  });
});

describe("durations (--idle-timeout)", () => {
  it("reads units and refuses what is not a duration", async () => {
    const { parseDuration, idleTimeoutFrom } = await import("../../src/config/runtime-config.js");
    expect(parseDuration("500ms", "--x")).toBe(500);
    expect(parseDuration("90s", "--x")).toBe(90_000);
    expect(parseDuration("12h", "--x")).toBe(12 * 3_600_000);
    expect(parseDuration(undefined, "--x")).toBeUndefined();
    for (const bad of ["12", "h", "-5m", "0s", "5 parsecs"]) {
      expect(() => parseDuration(bad, "--idle-timeout")).toThrow(/--idle-timeout must be a duration/);
    }
    expect(idleTimeoutFrom({}, { AGENTLOOP_IDLE_TIMEOUT: "30m" })).toBe(1_800_000);
    expect(idleTimeoutFrom({ "idle-timeout": "1m" }, { AGENTLOOP_IDLE_TIMEOUT: "30m" })).toBe(60_000);
  });
});

describe("load shedding (--max-loop-delay)", () => {
  it("defaults to 1 s, reads the flag before the environment, turns off with 0, and refuses what is out of range", async () => {
    const { maxLoopDelayFrom } = await import("../../src/config/runtime-config.js");
    expect(maxLoopDelayFrom({}, {})).toBe(1_000);
    expect(maxLoopDelayFrom({}, { AGENTLOOP_MAX_LOOP_DELAY: "2s" })).toBe(2_000);
    expect(maxLoopDelayFrom({ "max-loop-delay": "250ms" }, { AGENTLOOP_MAX_LOOP_DELAY: "2s" })).toBe(250);
    expect(maxLoopDelayFrom({ "max-loop-delay": "0" }, {})).toBeUndefined();
    for (const bad of ["5ms", "2m", "soon"]) {
      expect(() => maxLoopDelayFrom({ "max-loop-delay": bad }, {})).toThrow(/--max-loop-delay must be/);
    }
  });
});

describe("chats in progress at most (--max-chats)", () => {
  it("defaults to 1,000, reads the flag before the environment, turns off with 0, and refuses what is not a count", async () => {
    const { maxChatsFrom } = await import("../../src/config/runtime-config.js");
    expect(maxChatsFrom({}, {})).toBe(1_000);
    expect(maxChatsFrom({}, { AGENTLOOP_MAX_CHATS: "50" })).toBe(50);
    expect(maxChatsFrom({ "max-chats": "200" }, { AGENTLOOP_MAX_CHATS: "50" })).toBe(200);
    expect(maxChatsFrom({ "max-chats": "0" }, {})).toBeUndefined();
    for (const bad of ["-1", "1.5", "many"]) {
      expect(() => maxChatsFrom({ "max-chats": bad }, {})).toThrow(/--max-chats must be a positive integer/);
    }
  });
});

describe("the NATS hold buffer (--nats-hold-mb)", () => {
  it("reads MiB from the flag, then the environment, and refuses what is not a positive integer", async () => {
    const { natsHoldBytesFrom } = await import("../../src/config/runtime-config.js");
    expect(natsHoldBytesFrom({}, {})).toBeUndefined();
    expect(natsHoldBytesFrom({}, { AGENTLOOP_NATS_HOLD_MB: "8" })).toBe(8 * 1024 * 1024);
    expect(natsHoldBytesFrom({ "nats-hold-mb": "2" }, { AGENTLOOP_NATS_HOLD_MB: "8" })).toBe(2 * 1024 * 1024);
    for (const bad of ["0", "-1", "1.5", "lots"]) {
      expect(() => natsHoldBytesFrom({ "nats-hold-mb": bad }, {})).toThrow(
        /--nats-hold-mb must be a positive integer/,
      );
    }
  });
});

describe("session memory limits (--max-memory-bytes, --max-session-bytes)", () => {
  it("reads bytes with an optional binary unit from the flag, then the environment, and refuses the rest", async () => {
    const { memoryLimitsFrom } = await import("../../src/config/runtime-config.js");
    expect(memoryLimitsFrom({}, {})).toEqual({});
    expect(memoryLimitsFrom({ "max-memory-bytes": "512m" }, { AGENTLOOP_MAX_SESSION_BYTES: "2000" })).toEqual(
      {
        maxMemoryBytes: 512 * 1024 * 1024,
        maxSessionBytes: 2_000,
      },
    );
    expect(memoryLimitsFrom({ "max-session-bytes": "1GiB" }, {}).maxSessionBytes).toBe(1024 ** 3);
    expect(memoryLimitsFrom({ "max-memory-bytes": "64k" }, { AGENTLOOP_MAX_MEMORY_BYTES: "9" })).toEqual({
      maxMemoryBytes: 64 * 1024,
    });
    for (const bad of ["0", "-1", "1.5", "lots", "12t"]) {
      expect(() => memoryLimitsFrom({ "max-memory-bytes": bad }, {})).toThrow(UsageError);
      expect(() => memoryLimitsFrom({ "max-session-bytes": bad }, {})).toThrow(
        /--max-session-bytes must be a number of bytes above 0/,
      );
    }
  });
});

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RuntimeConfig } from "../../src/cli/cli-context.js";
import {
  AgentDefinitionsError,
  loadAgentDefinitions,
  parseAgentDefinitions,
} from "../../src/config/agent-definitions.js";
import { createHostToolSetRegistry } from "../../src/host/create-session-agent.js";

const config: RuntimeConfig = {
  provider: "anthropic",
  model: "claude-sonnet-4-5",
  apiKey: "sk-cli",
  baseUrl: "http://127.0.0.1:9/anthropic",
  maxIterations: 7,
  reasoningEffort: "low",
  contextWindow: 200_000,
  natsUrl: "nats://127.0.0.1:4222",
  prefix: "agentloop",
};
const knownTools = createHostToolSetRegistry().names();

let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "agentloop-defs-"));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

function parse(value: unknown) {
  return parseAgentDefinitions(JSON.stringify(value), "agents.json", config, { knownTools });
}

function refusal(value: unknown): string {
  try {
    parse(value);
  } catch (error) {
    expect(error).toBeInstanceOf(AgentDefinitionsError);
    return (error as Error).message;
  }
  throw new Error("expected the file to be refused");
}

describe("agent definitions", () => {
  it("without a file: one agent `assistant` with every built-in tool, settings from the CLI", async () => {
    expect(await loadAgentDefinitions(undefined, config, { knownTools })).toEqual([
      {
        name: "assistant",
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        apiKey: "sk-cli",
        baseUrl: "http://127.0.0.1:9/anthropic",
        tools: ["todo_list", "current_time", "ask_agent"],
        maxIterations: 7,
        reasoningEffort: "low",
        contextWindow: 200_000,
        promptCaching: true,
      },
    ]);
  });

  it("reads a file, filling unset fields from the CLI; another provider keeps its own key and URL", async () => {
    const path = join(directory, "agents.json");
    await writeFile(
      path,
      JSON.stringify({
        agents: [
          { name: "writer", systemPrompt: "You write.", tools: ["todo_list"], maxIterations: 3 },
          {
            name: "coder",
            provider: "openai-chat",
            model: "gpt-4o",
            tools: ["shell"],
            reasoningEffort: "high",
          },
          { name: "tiny", contextWindow: 8_000, baseUrl: "http://127.0.0.1:8/v1" },
        ],
      }),
    );
    const [writer, coder, tiny] = await loadAgentDefinitions(path, config, { knownTools });
    expect(writer).toEqual({
      name: "writer",
      systemPrompt: "You write.",
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      apiKey: "sk-cli",
      baseUrl: "http://127.0.0.1:9/anthropic",
      tools: ["todo_list"],
      maxIterations: 3,
      reasoningEffort: "low",
      contextWindow: 200_000,
      promptCaching: true,
    });
    expect(coder).toEqual({
      name: "coder",
      provider: "openai-chat",
      model: "gpt-4o",
      tools: ["shell"],
      maxIterations: 7,
      reasoningEffort: "high",
      contextWindow: 128_000,
    });
    expect(tiny).toMatchObject({ contextWindow: 8_000, baseUrl: "http://127.0.0.1:8/v1" });
  });

  it("refuses a bad file with the path and the field", async () => {
    await expect(
      loadAgentDefinitions(join(directory, "missing.json"), config, { knownTools }),
    ).rejects.toThrow(`agents file ${join(directory, "missing.json")}: cannot be read (no such file)`);
    const broken = join(directory, "broken.json");
    await writeFile(broken, "{ agents: [");
    await expect(loadAgentDefinitions(broken, config, { knownTools })).rejects.toThrow(
      new RegExp(`^agents file ${broken}: is not valid JSON`),
    );
    // Where it broke, never the text around it: an agents file may hold a key.
    const key = "sk-test-SECRET1234567890abcdef";
    for (const text of [
      `{"agents":[{"name":"a","systemPrompt":"${key}" x}]}`,
      `{"agents":[{"name":"a",\n "systemPrompt": ${key}}]}`,
    ]) {
      await writeFile(broken, text);
      const refused = await loadAgentDefinitions(broken, config, { knownTools }).catch(
        (error: unknown) => error,
      );
      expect(String(refused)).toMatch(/is not valid JSON/);
      expect(String(refused)).not.toMatch(/SECRET|sk-test/);
    }
    await writeFile(broken, '{"agents": [\n  {"name": "a"} x\n]}');
    await expect(loadAgentDefinitions(broken, config, { knownTools })).rejects.toThrow(
      "is not valid JSON (line 2, column 17)",
    );
    // Plain words with the path, never zod's own ("Invalid input: expected array, received undefined").
    expect(refusal({})).toBe("agents file agents.json: agents: is missing");
    expect(refusal([])).toBe(
      "agents file agents.json: the top level must be an object ({…}), not a list ([…])",
    );
    expect(refusal({ agents: {} })).toBe(
      "agents file agents.json: agents: must be a list ([…]), not an object ({…})",
    );
    expect(refusal({ agents: [{ name: 7 }] })).toBe(
      "agents file agents.json: agents[0].name: must be a text in quotes, not a number",
    );
    expect(refusal({ agents: [{ name: "a", maxIterations: 1.5 }] })).toBe(
      "agents file agents.json: agents[0].maxIterations: must be a whole number",
    );
    expect(refusal({ agents: [] })).toBe("agents file agents.json: agents: must list at least one agent");
    expect(refusal({ agents: [{ name: "a.b" }] })).toMatch(
      /^agents file agents.json: agents\[0\]\.name: must match/,
    );
    expect(refusal({ agents: [{ name: "a", maxIterations: 0 }] })).toMatch(/agents\[0\]\.maxIterations: /);
    expect(refusal({ agents: [{ name: "a", provider: "gemini" }] })).toMatch(
      /agents\[0\]\.provider: must be one of "anthropic", /,
    );
    expect(refusal({ agents: [{ name: "a", reasoningEffort: "max" }] })).toMatch(
      /agents\[0\]\.reasoningEffort: /,
    );
    expect(refusal({ agents: [{ name: "a", systemprompt: "typo" }] })).toBe(
      'agents file agents.json: agents[0]: unknown field "systemprompt"',
    );
    expect(refusal({ agents: [{ name: "a" }, { name: "a" }] })).toBe(
      'agents file agents.json: agents[1].name: duplicate agent "a"',
    );
    expect(refusal({ agents: [{ name: "a", tools: ["todo_list", "teleport"] }] })).toMatch(
      /^agents file agents.json: agents\[0\]\.tools\[1\]: unknown tool set "teleport"/,
    );
    expect(refusal({ agents: [{ name: "a", provider: "openai-chat" }] })).toMatch(
      /agents\[0\]\.model: agent "a" uses provider openai-chat .*name its model/,
    );
  });

  it("reads shellEnv, the variables an agent's shell commands may see, and refuses what is not a name", () => {
    const [agent] = parse({ agents: [{ name: "ops", tools: ["shell"], shellEnv: ["GITHUB_TOKEN", "_X1"] }] });
    expect(agent?.shellEnv).toEqual(["GITHUB_TOKEN", "_X1"]);
    expect(parse({ agents: [{ name: "plain" }] })[0]).not.toHaveProperty("shellEnv");
    expect(refusal({ agents: [{ name: "a", shellEnv: ["A=B"] }] })).toBe(
      "agents file agents.json: agents[0].shellEnv[0]: must be an environment variable name",
    );
    expect(refusal({ agents: [{ name: "a", shellEnv: "PATH" }] })).toMatch(/agents\[0\]\.shellEnv: /);
  });

  it("reads needsApproval, the tools whose calls wait for a person, and refuses what is not a tool name", () => {
    const [agent] = parse({ agents: [{ name: "ops", tools: ["shell"], needsApproval: ["shell"] }] });
    expect(agent?.needsApproval).toEqual(["shell"]);
    expect(parse({ agents: [{ name: "plain" }] })[0]).not.toHaveProperty("needsApproval");
    expect(refusal({ agents: [{ name: "a", needsApproval: ["rm -rf"] }] })).toBe(
      "agents file agents.json: agents[0].needsApproval[0]: must be a tool name",
    );
  });

  it("turns Anthropic prompt caching on by default; the file's promptCaching switches it", () => {
    const agents = parseAgentDefinitions(
      JSON.stringify({
        agents: [
          { name: "cached" },
          { name: "uncached", promptCaching: false },
          { name: "other", provider: "openai-chat", model: "gpt-4o" },
        ],
      }),
      "agents.json",
      config,
      { knownTools },
    );
    expect(agents.map((agent) => agent.promptCaching)).toEqual([true, undefined, undefined]);
    expect(refusal({ agents: [{ name: "a", promptCaching: "yes" }] })).toMatch(
      /agents\[0\]\.promptCaching: /,
    );
  });

  it("uses the injected per-provider default model when an agent switches provider", () => {
    const [agent] = parseAgentDefinitions(
      JSON.stringify({ agents: [{ name: "a", provider: "demo" }] }),
      "agents.json",
      config,
      { knownTools, defaultModel: (provider) => (provider === "demo" ? "demo" : undefined) },
    );
    expect(agent).toMatchObject({ provider: "demo", model: "demo" });
    expect(agent?.apiKey).toBeUndefined();
  });
});

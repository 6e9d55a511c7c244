import { describe, expect, it } from "vitest";
import type { RuntimeConfig } from "../../src/cli/cli-context.js";
import { AgentDefinitionsError, parseAgentDefinitions } from "../../src/config/agent-definitions.js";
import { createHostToolSetRegistry } from "../../src/host/create-session-agent.js";

/** An agent's `approval.selfApprove`: who may answer the approval queries of a protocol prompt. */

const config: RuntimeConfig = {
  provider: "anthropic",
  model: "claude-sonnet-4-5",
  contextWindow: 200_000,
  natsUrl: "nats://127.0.0.1:4222",
  prefix: "agentloop",
};

function parse(value: unknown) {
  return parseAgentDefinitions(JSON.stringify(value), "agents.json", config, {
    knownTools: createHostToolSetRegistry().names(),
  });
}

describe("the approval setting of an agent", () => {
  it("is off unless the file says selfApprove: true; anything else in it is refused", () => {
    const [open, guarded, explicit] = parse({
      agents: [
        { name: "open", approval: { selfApprove: true } },
        { name: "guarded" },
        { name: "explicit", approval: { selfApprove: false } },
      ],
    });
    expect(open?.selfApprove).toBe(true);
    expect(guarded).not.toHaveProperty("selfApprove");
    expect(explicit).not.toHaveProperty("selfApprove");
    expect(() => parse({ agents: [{ name: "a", approval: { selfApprove: "yes" } }] })).toThrow(
      AgentDefinitionsError,
    );
    expect(() => parse({ agents: [{ name: "a", approval: { approvers: ["bob"] } }] })).toThrow(
      /agents\[0\]\.approval/,
    );
  });
});

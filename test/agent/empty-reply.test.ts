import { describe, expect, it } from "vitest";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import { createTestAgent } from "../support/agent-harness.js";

/** An empty reply becomes exactly `(the model returned no content)`, never "". */

describe("an empty reply", () => {
  it.each([
    ["no content at all", {}],
    ["whitespace only", { text: " \n\t " }],
  ])("%s becomes the placeholder", async (_, step) => {
    const { agent, eventsOf } = await createTestAgent({ script: [step] });
    const { result } = await agent.chat("say nothing");
    expect(result).toBe("(the model returned no content)");
    expect(eventsOf("ChatCompleted")[0]?.result).toBe("(the model returned no content)");
  });

  it("the empty assistant turn itself is not persisted (providers reject empty turns)", async () => {
    const history = new InMemoryContextHistory();
    const { agent } = await createTestAgent({ script: [{}], history });
    await agent.chat("say nothing");
    expect(await history.restore()).toEqual([{ role: "user", content: "say nothing" }]);
  });

  it("reasoning without text still counts as no content", async () => {
    const { agent } = await createTestAgent({ script: [{ reasoning: "I thought about it." }] });
    expect((await agent.chat("hm")).result).toBe("(the model returned no content)");
  });
});

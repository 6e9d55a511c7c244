import { describe, expect, it } from "vitest";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import { conversation } from "./history-fixtures.js";

describe("InMemoryContextHistory", () => {
  it("appends, replaces and clears like a persisted history, without system messages", async () => {
    const history = new InMemoryContextHistory();
    await history.append([{ role: "system", content: "You are a bot." }, ...conversation.slice(0, 2)]);
    await history.append(conversation.slice(2));
    expect(await history.restore()).toEqual(conversation);

    await history.replace([
      { role: "system", content: "x" },
      { role: "user", content: "Summary." },
    ]);
    expect(await history.restore()).toEqual([{ role: "user", content: "Summary." }]);

    await history.clear();
    expect(await history.restore()).toEqual([]);
  });

  it("copies messages in and out", async () => {
    const message = { role: "user" as const, content: "hello" };
    const history = new InMemoryContextHistory([message]);
    message.content = "changed";
    const restored = await history.restore();
    restored[0]!.content = "changed too";
    expect(await history.restore()).toEqual([{ role: "user", content: "hello" }]);
  });
});

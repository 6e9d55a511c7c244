import { afterEach, describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/events/types.js";
import { turn } from "../../src/testing/index.js";
import {
  type FakeProvider,
  parseJsonl,
  runBinary,
  runCli,
  startFakeProvider,
  textTurn,
} from "../support/cli.js";

/**
 * `agentloop viz` names the states of each machine's loop in all three formats (and the built
 * binary prints what main() prints), and every state a real chat reports in `StateChanged` events
 * is a state the exported diagram of that machine has, so a live diagram can always highlight it.
 */

interface GraphNode {
  id: string;
  key: string;
  children: GraphNode[];
}

function stateIds(node: GraphNode): string[] {
  return [node.id, ...node.children.flatMap(stateIds)];
}

const NAMED_STATES = {
  chat: [
    "preparing",
    "iterating",
    "finalTurn",
    "measuring",
    "compacting",
    "appending",
    "done",
    "failed",
    "cancelled",
  ],
  iteration: ["streaming", "assembling", "executingTools", "backfilling"],
  compaction: ["requesting", "replacingHistory", "failed"],
  session: ["idle", "processing", "compacting", "resetting"],
} as const;

describe("viz exports", () => {
  it.each(
    Object.entries(NAMED_STATES),
  )("--machine %s names its states in mermaid, json and svg", async (machine, states) => {
    const [mermaid, json, svg] = await Promise.all(
      (["mermaid", "json", "svg"] as const).map((format) =>
        runCli(["viz", "--machine", machine, "--format", format]),
      ),
    );
    for (const run of [mermaid, json, svg]) {
      expect(run?.code).toBe(0);
      expect(run?.stderr).toBe("");
    }
    const graph = JSON.parse(json!.stdout) as { name: string; root: GraphNode };
    expect(graph.name).toBe(machine);
    const keys = stateIds(graph.root).map((id) => id.split(".").at(-1));
    for (const state of states) {
      expect(mermaid!.stdout, state).toMatch(new RegExp(`state "${state}" as `));
      expect(keys, state).toContain(state);
      expect(svg!.stdout, state).toMatch(new RegExp(`data-state-id="${machine}\\.([A-Za-z]+\\.)*${state}"`));
    }
  });

  it("the built binary prints each format exactly as main() does", async () => {
    // One machine is enough here: the binary runs the same main() the in-process runs above use.
    for (const format of ["mermaid", "json", "svg"] as const) {
      const argv = ["viz", "--machine", "chat", "--format", format];
      const [built, inProcess] = await Promise.all([runBinary(argv), runCli(argv)]);
      expect(built, format).toEqual({ code: 0, stdout: inProcess.stdout, stderr: "" });
    }
  });
});

let fake: FakeProvider | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe("StateChanged events match the exported diagrams", () => {
  it("a tool loop that compacts reports only states the diagrams have, ending in done", async () => {
    fake = await startFakeProvider("openai-chat", [
      turn({ toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }] }),
      textTurn("It is noon."),
      textTurn("Summary: noon."),
    ]);
    const run = await runCli(
      ["chat", "--local", ...fake.flags, "--context-window", "10", "--events", "jsonl", "time?"],
      { env: fake.env },
    );
    expect(run.code).toBe(0);
    const { events } = parseJsonl(run.stdout);
    const changes = events.filter(
      (event): event is Extract<AgentEvent, { kind: "StateChanged" }> => event.kind === "StateChanged",
    );
    const machines = new Set(changes.map((event) => event.machine));
    expect([...machines].sort()).toEqual(["chat", "compaction", "iteration"]);
    for (const machine of machines) {
      const json = await runCli(["viz", "--machine", machine, "--format", "json"]);
      const ids = new Set(stateIds((JSON.parse(json.stdout) as { root: GraphNode }).root));
      for (const change of changes.filter((event) => event.machine === machine)) {
        // A state value is a key or { parent: child }: its leaf path must be a state of the diagram.
        const path: string[] = [];
        let value: unknown = change.state;
        while (typeof value === "object" && value !== null) {
          const [key, inner] = Object.entries(value as Record<string, unknown>)[0] ?? [];
          if (key === undefined) break;
          path.push(key);
          value = inner;
        }
        if (typeof value === "string") path.push(value);
        expect(ids, `${machine}: ${JSON.stringify(change.state)}`).toContain([machine, ...path].join("."));
      }
    }
    const iterationStates = changes
      .filter((event) => event.machine === "iteration")
      .map((event) => event.state);
    expect(iterationStates).toEqual(
      expect.arrayContaining(["streaming", "assembling", "executingTools", "backfilling"]),
    );
    expect(changes.filter((event) => event.machine === "chat").at(-1)?.state).toBe("done");
  });
});

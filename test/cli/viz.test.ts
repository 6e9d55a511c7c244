import { describe, expect, it } from "vitest";
import { linesOf, runCli, stackLines } from "../support/cli.js";

const MACHINES = ["chat", "iteration", "compaction", "session"] as const;

describe("agentloop viz", () => {
  it("draws the chat machine as mermaid by default, naming the states of the loop", async () => {
    const run = await runCli(["viz"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout.startsWith("stateDiagram-v2\n")).toBe(true);
    for (const state of [
      "preparing",
      "iterating",
      "finalTurn",
      "measuring",
      "compacting",
      "appending",
      "done",
      "failed",
      "cancelled",
    ]) {
      expect(run.stdout, state).toMatch(new RegExp(`state "${state}" as `));
    }
  });

  it.each(MACHINES)("--machine %s in all three formats", async (machine) => {
    const mermaid = await runCli(["viz", "--machine", machine, "--format", "mermaid"]);
    expect(mermaid.code).toBe(0);
    expect(mermaid.stdout.startsWith("stateDiagram-v2\n")).toBe(true);

    const json = await runCli(["viz", "--machine", machine, "--format", "json"]);
    expect(json.code).toBe(0);
    const graph = JSON.parse(json.stdout) as {
      name: string;
      root: { children: unknown[] };
      transitions: unknown[];
    };
    expect(graph.name).toBe(machine);
    expect(graph.root.children.length).toBeGreaterThan(1);
    expect(graph.transitions.length).toBeGreaterThan(0);

    const svg = await runCli(["viz", "--machine", machine, "--format", "svg"]);
    expect(svg.code).toBe(0);
    expect(svg.stdout.startsWith("<svg")).toBe(true);
    expect(svg.stdout.trimEnd().endsWith("</svg>")).toBe(true);
    expect(svg.stdout).toContain(`data-state-id="${machine}.`);
    for (const run of [mermaid, json, svg]) expect(run.stderr).toBe("");
  });

  // ELK is deterministic and the coordinates are rounded: the drawings are byte-stable. A layout
  // change shows up here as a diff of the snapshot files (review them as pictures).
  it.each(MACHINES)("--machine %s: the svg and json are the snapshots, byte for byte", async (machine) => {
    for (const format of ["svg", "json"] as const) {
      const run = await runCli(["viz", "--machine", machine, "--format", format]);
      expect(run.code).toBe(0);
      await expect(run.stdout).toMatchFileSnapshot(`__snapshots__/viz-${machine}.${format}`);
    }
  });

  it("the chat svg marks every state of the loop with its id", async () => {
    const run = await runCli(["viz", "--format=svg", "--machine=chat"]);
    for (const id of [
      "chat.preparing",
      "chat.iterating",
      "chat.iterating.finalTurn",
      "chat.compacting",
      "chat.done",
    ]) {
      expect(run.stdout).toContain(`data-state-id="${id}"`);
    }
  });

  it.each([
    [
      ["viz", "--machine", "nope"],
      /--machine must be one of chat, iteration, session, compaction, got "nope"/,
    ],
    [["viz", "--format", "png"], /--format must be one of mermaid, json, svg, got "png"/],
    [["viz", "--machine"], /--machine needs a value/],
    [["viz", "--colour"], /unknown option --colour/],
  ])("%j → exit 2 and one line on stderr", async (argv, message) => {
    const run = await runCli(argv);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: /);
    expect(run.stderr).toMatch(message);
    expect(stackLines(run.stderr)).toEqual([]);
  });
});

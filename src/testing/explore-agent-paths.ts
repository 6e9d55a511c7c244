import type { AnyStateMachine, InspectionEvent } from "xstate";
import { chatMachine } from "../../machines/chat.machine.js";
import { compactionMachine } from "../../machines/compaction.machine.js";
import { iterationMachine } from "../../machines/iteration.machine.js";
import type { Agent, CreateAgentParams } from "../agent/agent-types.js";
import { createAgent } from "../agent/create-agent.js";
import { describeError } from "../errors/describe-error.js";
import type { AgentPath, AgentSetup } from "./agent-path.js";
import { builtinAgentPaths } from "./agent-paths.js";
import { type CoverageReport, createMachineCoverage } from "./machine-coverage.js";
import { scriptedModel } from "./scripted-model.js";

export type { AgentPath, AgentPathRun, AgentSetup } from "./agent-path.js";

/** How one path went. */
export interface AgentPathResult {
  name: string;
  ok: boolean;
  /** Why the path did not go as planned (the chat ended otherwise, the agent threw...). */
  error?: string;
}

/** Covered and total counts over every explored machine. */
export interface CoverageCount {
  covered: number;
  total: number;
}

/** What {@link exploreAgentPaths} found. */
export interface AgentPathsReport {
  states: CoverageCount;
  transitions: CoverageCount;
  /**
   * What no path reached, in definition order: `state <id>` and `transition <source> --<event>-->
   * #<n>` (ids carry their machine's id, e.g. `chat.recoveringContext`).
   */
  missing: string[];
  /** Per machine id, the full figures. */
  machines: Record<string, CoverageReport>;
  /** Every path, in the order run; a path that went wrong is reported here, never skipped. */
  paths: AgentPathResult[];
}

/** Options of {@link exploreAgentPaths}. */
export interface ExploreAgentPathsOptions {
  /**
   * Builds the agent under test from a path's {@link AgentSetup}. Default: the library's
   * `createAgent` with model "scripted". Pass the setup through, e.g.
   * `(setup) => createAgent({ ...setup, model: "m", history })`.
   */
  createAgent?: (setup: AgentSetup) => Agent | Promise<Agent>;
  /**
   * The paths to run: built-in names (see {@link builtinAgentPaths}) or your own
   * {@link AgentPath}s. Default: every built-in path. An unknown name throws.
   */
  paths?: ReadonlyArray<string | AgentPath>;
  /** The machine definitions to measure. Default: the chat, iteration and compaction machines. */
  machines?: readonly AnyStateMachine[];
}

/**
 * Model-based coverage of an agent: runs a scripted chat along each path (a tool turn, the
 * final turn, a tool error, a cancel, compaction...) on agents built by `createAgent`, records the
 * microsteps the real machines take (XState inspection), and reports which states and
 * transitions of the machines' definitions were taken and which were not.
 *
 * @param options How to build the agent under test, which paths to run, which machines to measure.
 * @returns The covered and total states and transitions, what was missed, and each path's outcome.
 *
 * @example
 * ```ts
 * import { createAgent, InMemoryContextHistory } from "agentloop";
 * import { exploreAgentPaths } from "agentloop/testing";
 *
 * // Your own agent setup (here: with a history) along every built-in path.
 * const report = await exploreAgentPaths({
 *   createAgent: (setup) => createAgent({ ...setup, model: "m", history: new InMemoryContextHistory() }),
 * });
 * for (const path of report.paths) if (!path.ok) console.error(`${path.name}: ${path.error}`);
 * console.log(`transitions ${report.transitions.covered}/${report.transitions.total}`, report.missing);
 * ```
 */
export async function exploreAgentPaths(options: ExploreAgentPathsOptions = {}): Promise<AgentPathsReport> {
  const known = builtinAgentPaths();
  const paths = (options.paths ?? Object.keys(known)).map((path) => {
    if (typeof path !== "string") return path;
    const found = known[path];
    if (found === undefined) {
      throw new TypeError(
        `exploreAgentPaths: unknown path "${path}" (built in: ${Object.keys(known).join(", ")}; pass an AgentPath for others)`,
      );
    }
    return found;
  });
  const machines = options.machines ?? [chatMachine, iterationMachine, compactionMachine];
  const coverages = machines.map((machine) => ({ machine, coverage: createMachineCoverage(machine) }));
  const inspect = (inspection: InspectionEvent) => {
    for (const { coverage } of coverages) coverage.inspect(inspection);
  };
  const build =
    options.createAgent ??
    ((setup: AgentSetup) => createAgent({ ...setup, model: "scripted" } as CreateAgentParams));

  const results: AgentPathResult[] = [];
  for (const path of paths) {
    try {
      const run = path.prepare();
      const llm = scriptedModel(run.script);
      const agent = await build({ llm, toolSets: run.toolSets ?? [], options: run.options ?? {}, inspect });
      await run.drive(agent, llm);
      results.push({ name: path.name, ok: true });
    } catch (error) {
      results.push({
        name: path.name,
        ok: false,
        error: describeError(error),
      });
    }
  }

  const report: AgentPathsReport = {
    states: { covered: 0, total: 0 },
    transitions: { covered: 0, total: 0 },
    missing: [],
    machines: {},
    paths: results,
  };
  for (const { machine, coverage } of coverages) {
    const figures = coverage.report();
    report.machines[machine.id] = figures;
    report.states.covered += figures.states.visited;
    report.states.total += figures.states.total;
    report.transitions.covered += figures.transitions.visited;
    report.transitions.total += figures.transitions.total;
    report.missing.push(
      ...figures.states.missing.map((id) => `state ${id}`),
      ...figures.transitions.missing.map((key) => `transition ${key}`),
    );
  }
  return report;
}

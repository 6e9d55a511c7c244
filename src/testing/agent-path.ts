import type { InspectionEvent } from "xstate";
import type { Agent, AgentOptions } from "../agent/agent-types.js";
import type { ToolSet } from "../tools/tool-set.js";
import type { Script } from "./scripted-backend.js";
import type { ScriptedModel } from "./scripted-model.js";

/** What a path needs of the agent under test, handed to {@link ExploreAgentPathsOptions.createAgent}. */
export interface AgentSetup {
  /** The scripted model playing the path's script. */
  llm: ScriptedModel;
  /** The path's tools (pass them on, after any of your own). */
  toolSets: ToolSet[];
  /** The path's options (e.g. a small token limit for compaction); merge yours under them. */
  options: AgentOptions;
  /** The coverage recorder: pass it as `createAgent({ inspect })`. */
  inspect: (inspection: InspectionEvent) => void;
}

/** One run of a path: the agent it needs and how to drive it. */
export interface AgentPathRun {
  script: Script;
  toolSets?: ToolSet[];
  options?: AgentOptions;
  /** Drives the agent along the path; rejects when the path did not go as planned. */
  drive(agent: Agent, model: ScriptedModel): Promise<void>;
}

/**
 * A path through the machines: a name and a factory for a fresh run (fresh tools and state each
 * time). Pass your own to {@link exploreAgentPaths} to cover states a built-in path does not reach.
 */
export interface AgentPath {
  name: string;
  prepare(): AgentPathRun;
}

/**
 * The testing kit (`agentloop/testing`): what agentloop's own tests use, for any test runner.
 *
 * - A scripted model, turns as data ({@link scriptedModel}, {@link ScriptedBackend}).
 * - Fake providers speaking the Anthropic, OpenAI Chat and OpenAI Responses wire formats
 *   ({@link startFakeProvider}, and the lower-level fakes and frame builders).
 * - A recorder turning a real provider's SSE into a fixture, and its replay
 *   ({@link recordProvider}, {@link replayFixture}).
 * - Model-based coverage of the machines ({@link exploreAgentPaths}, {@link createMachineCoverage}).
 */

export { builtinAgentPaths } from "./agent-paths.js";
export {
  type AgentPath,
  type AgentPathResult,
  type AgentPathRun,
  type AgentPathsReport,
  type AgentSetup,
  type CoverageCount,
  type ExploreAgentPathsOptions,
  exploreAgentPaths,
} from "./explore-agent-paths.js";
export {
  type AnthropicEvent,
  type AnthropicTurn,
  anthropicError,
  anthropicMessage,
  anthropicSse,
  anthropicSseFrame,
  anthropicStream,
  anthropicTurnJson,
  anthropicTurnSse,
  type FakeAnthropic,
  startFakeAnthropic,
} from "./fake-anthropic.js";
export {
  type FakeHttpServer,
  type FakeResponse,
  type FakeRoute,
  type RecordedRequest,
  startFakeHttpServer,
} from "./fake-http-server.js";
export {
  chatChunksSse,
  chatTurnJson,
  chatTurnSse,
  cutAfterFrames,
  type FakeOpenAI,
  type FakeOpenAIOptions,
  type OpenAIEndpoint,
  type OpenAIReply,
  type OpenAIScript,
  type OpenAITurn,
  type OpenAITurnToolCall,
  openAIError,
  responsesSse,
  responsesTurnJson,
  responsesTurnSse,
  sseFrame,
  stallAfterFrames,
  startFakeOpenAI,
  type TurnSpec,
  turn,
} from "./fake-openai.js";
export {
  type FakeProvider,
  type FakeProviderKind,
  type FakeProviderOptions,
  type FakeProviderReply,
  type FakeProviderScript,
  startFakeProvider,
} from "./fake-provider.js";
export { loadTranscript, parseSseFrames } from "./load-transcript.js";
export {
  type CoverageFigures,
  type CoverageReport,
  createMachineCoverage,
  definedStates,
  definedTransitions,
  type MachineCoverage,
  type PlannedPath,
  type PlannedStep,
  planEdgePaths,
  planPathFromEvents,
  planSimplePaths,
  type Traversal,
  transitionKey,
} from "./machine-coverage.js";
export {
  type FixtureExchange,
  type FixtureRecord,
  type FixtureReplay,
  type ProviderRecorder,
  type RecordProviderOptions,
  readFixture,
  recordProvider,
  replayFixture,
} from "./provider-recorder.js";
export {
  type Script,
  ScriptedBackend,
  type ScriptedFailure,
  type ScriptedFault,
  type ScriptedFaultKind,
  type ScriptedRequest,
  type ScriptedResponse,
  type ScriptedStep,
  type ScriptedToolCall,
} from "./scripted-backend.js";
export { ScriptedModel, type ScriptedModelOptions, scriptedModel } from "./scripted-model.js";

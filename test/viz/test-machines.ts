import { fromPromise, not, setup } from "xstate";

/**
 * Small machines shaped like the project's (nesting, invokes, guards, delays, loops, a parallel
 * state), so the drawing is tested without depending on the real machine definitions.
 */
export const loopLikeMachine = setup({
  actors: {
    runIteration: fromPromise(async () => ({ done: true })),
    compact: fromPromise(async () => "summary"),
    appendHistory: fromPromise(async () => undefined),
  },
  guards: {
    isNextFinal: () => false,
    hasAnswer: () => true,
    shouldCompact: () => false,
    isCancelled: () => false,
  },
  delays: { prepareTimeout: 5_000 },
}).createMachine({
  id: "loop",
  initial: "preparing",
  states: {
    preparing: {
      on: { START: "iterating" },
      after: { prepareTimeout: "failed" },
    },
    iterating: {
      initial: "turn",
      on: { STOP: "#loop.cancelled", PING: {} },
      states: {
        turn: {
          invoke: {
            id: "iteration",
            src: "runIteration",
            onDone: [
              { guard: "hasAnswer", target: "#loop.measuring" },
              { guard: "isNextFinal", target: "finalTurn" },
              { target: "turn", reenter: true },
            ],
            onError: "#loop.failed",
          },
        },
        finalTurn: {
          invoke: { src: "runIteration", onDone: "#loop.measuring", onError: "#loop.failed" },
        },
      },
    },
    measuring: {
      always: [{ guard: not("shouldCompact"), target: "appending" }, { target: "compacting" }],
    },
    compacting: {
      invoke: { id: "compaction", src: "compact", onDone: "appending", onError: "appending" },
    },
    appending: {
      invoke: { src: "appendHistory", onDone: "done", onError: "failed" },
      after: { 250: { target: "appending", reenter: true } },
    },
    done: { type: "final" },
    failed: { type: "final" },
    cancelled: { type: "final" },
  },
});

export const parallelMachine = setup({}).createMachine({
  id: "player",
  type: "parallel",
  states: {
    audio: {
      initial: "muted",
      states: { muted: { on: { UNMUTE: "playing" } }, playing: { on: { MUTE: "muted" } } },
    },
    video: {
      initial: "paused",
      states: {
        paused: { on: { PLAY: "running" } },
        running: { on: { PAUSE: "paused", END: "ended" } },
        ended: { type: "final" },
      },
    },
  },
});

export const iterationLikeMachine = setup({
  actors: { streamModel: fromPromise(async () => "text") },
  guards: { hasToolCalls: () => false },
}).createMachine({
  id: "iteration",
  initial: "streaming",
  states: {
    streaming: {
      invoke: { src: "streamModel", onDone: "assembling", onError: "failed" },
    },
    assembling: { always: [{ guard: "hasToolCalls", target: "executingTools" }, { target: "answered" }] },
    executingTools: { on: { "tools.settled": "toolsDone" } },
    answered: { type: "final" },
    toolsDone: { type: "final" },
    failed: { type: "final" },
  },
});

import { assign, createActor, setup } from "xstate";
import type { Message } from "../../src/llm/types.js";

/** A mailbox as small as a statechart session can be: idle ↔ processing, the queue in context. */
const minimalMailboxMachine = setup({
  types: {
    context: {} as { queue: string[] },
    events: {} as { type: "enqueue"; text: string } | { type: "processed" },
  },
}).createMachine({
  id: "minimalMailbox",
  context: { queue: [] },
  initial: "idle",
  states: {
    idle: {
      on: { enqueue: { target: "processing", actions: assign({ queue: ({ event }) => [event.text] }) } },
    },
    processing: {
      on: {
        enqueue: { actions: assign({ queue: ({ context, event }) => [...context.queue, event.text] }) },
        processed: { target: "idle", actions: assign({ queue: [] }) },
      },
    },
  },
});

/**
 * The baselines' idle session: its name and conversation (the loop itself is shared by all
 * sessions), and for the host comparison a started mailbox actor (its machine shared too).
 */
export function createMinimalXStateSession(session: string, hasMailbox: boolean) {
  const messages: Message[] = [];
  if (!hasMailbox) return { session, messages };
  const mailbox = createActor(minimalMailboxMachine);
  mailbox.start();
  return { session, messages, mailbox };
}

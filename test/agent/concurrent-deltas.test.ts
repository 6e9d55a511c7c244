import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/events/types.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * Exact delta counts and order with many chats running at once (a peer framework loses
 * token events at five concurrent streams; we must not). 20 sessions × 200 deltas, streamed with
 * small async gaps so the sessions interleave.
 */

const SESSIONS = 20;
const DELTAS = 200;

describe("many agents chatting at once", () => {
  it(`${SESSIONS} sessions × ${DELTAS} deltas: none lost, duplicated or reordered per session`, async () => {
    const all: AgentEvent[] = [];
    const harnesses = await Promise.all(
      Array.from({ length: SESSIONS }, (_, session) =>
        createTestAgent({
          session: `s${session}`,
          script: [
            {
              deltas: Array.from({ length: DELTAS }, (_, index) => `<${session}:${index}>`),
              delayMs: 1,
            },
          ],
          options: { onLog: (event) => all.push(event) },
        }),
      ),
    );
    const results = await Promise.all(harnesses.map(({ agent }, session) => agent.chat(`go ${session}`)));

    harnesses.forEach(({ eventsOf, events }, session) => {
      const expected = Array.from({ length: DELTAS }, (_, index) => `<${session}:${index}>`);
      expect(eventsOf("ModelTextDelta").map((event) => event.delta)).toEqual(expected);
      expect(results[session]?.result).toBe(expected.join(""));
      expect(eventsOf("ModelStreamSegmentStart")).toHaveLength(1);
      expect(events.every((event) => event.session === `s${session}`)).toBe(true);
      expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    });

    // The sessions really did stream at the same time: their deltas interleave.
    const deltaSessions = all
      .filter((event) => event.kind === "ModelTextDelta")
      .map((event) => event.session);
    expect(deltaSessions).toHaveLength(SESSIONS * DELTAS);
    const switches = deltaSessions.filter(
      (session, index) => index > 0 && session !== deltaSessions[index - 1],
    );
    expect(switches.length).toBeGreaterThan(SESSIONS * 10);
  });
});

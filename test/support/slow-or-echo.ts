import { ScriptedBackend } from "../../src/testing/index.js";

/**
 * A model for cancel tests: "slow" streams for a minute unless cancelled; anything else is echoed
 * at once (`echo: <text>`).
 */
export function slowOrEchoBackend(): ScriptedBackend {
  return new ScriptedBackend((request) => {
    const text = String(request.messages.at(-1)?.content ?? "");
    if (text === "slow") return { deltas: ["s", "low"], delayMs: 60_000 };
    return { text: `echo: ${text}` };
  });
}

import type { AgentEvent } from "../../events/types.js";
import type { CliContext } from "../cli-context.js";
import { createPalette, describeEvent } from "../format-event.js";

/** The ways `chat --events` can print a chat's events. */
export const EVENT_MODES = ["jsonl", "pretty", "none"] as const;
export type EventMode = (typeof EVENT_MODES)[number];

/**
 * Writes a chat's events the way `--events` asks, for the local and the remote chat alike:
 * `jsonl` one event per line; `pretty` the answer streamed as it comes with tool calls and resets
 * as dim lines; `none` nothing until the result.
 */
export function createEventPrinter(context: CliContext, mode: EventMode) {
  const palette = createPalette(context.stdout.isTTY === true);
  const plain = createPalette(false);
  let isMidLine = false;
  const endLine = () => {
    if (isMidLine) context.stdout.write("\n");
    isMidLine = false;
  };
  return {
    onEvent(event: AgentEvent) {
      if (mode === "jsonl") {
        context.stdout.write(`${JSON.stringify(event)}\n`);
        return;
      }
      if (mode !== "pretty") return;
      if (event.kind === "ModelTextDelta") {
        context.stdout.write(event.delta);
        isMidLine = !event.delta.endsWith("\n");
        return;
      }
      if (
        event.kind === "ModelReasoningDelta" ||
        event.kind === "StateChanged" ||
        event.kind === "ModelStreamSegmentStart"
      ) {
        return;
      }
      if (event.kind === "ChatCompleted") return;
      endLine();
      context.stdout.write(`${palette.dim(`· ${describeEvent(event, plain)}`)}\n`);
    },
    onResult(result: string, usage: unknown) {
      if (mode === "jsonl") {
        context.stdout.write(`${JSON.stringify({ kind: "Result", result, usage })}\n`);
      } else if (mode === "pretty") {
        endLine();
      } else {
        context.stdout.write(result.endsWith("\n") ? result : `${result}\n`);
      }
    },
  };
}

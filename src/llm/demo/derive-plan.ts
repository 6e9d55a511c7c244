import { truncateText } from "../../text/truncate-text.js";
/** One step of a `todo_list` plan. */
export interface DemoPlanStep {
  step: string;
  status: "pending" | "in_progress" | "completed";
}

/** The arguments the demo model sends to `todo_list`. */
export interface DemoPlan {
  plan: DemoPlanStep[];
  explanation: string;
}

const MAX_STEPS = 6;
const MAX_STEP_LENGTH = 80;

/**
 * A small plan derived from the user's words: the items of a bulleted or numbered list, else the
 * comma/"then"-separated items after a colon ("plan a trip: book flights, pack, go"), else three
 * generic steps about the request. The first step is in progress, the rest pending.
 */
export function derivePlan(prompt: string): DemoPlan {
  let items = listItems(prompt);
  if (items.length < 2) items = itemsAfterColon(prompt);
  if (items.length < 2) {
    items = [
      `Understand the request: ${shorten(prompt.replace(/\s+/g, " ").trim(), 50) || "(empty)"}`,
      "Work through it step by step",
      "Summarise the result",
    ];
  }
  const plan = items.slice(0, MAX_STEPS).map(
    (item, index): DemoPlanStep => ({
      step: shorten(capitalise(item.replace(/[.!?]+$/, "")), MAX_STEP_LENGTH),
      status: index === 0 ? "in_progress" : "pending",
    }),
  );
  return { plan, explanation: "A plan derived from your message by the demo model." };
}

function listItems(prompt: string): string[] {
  return prompt
    .split("\n")
    .map((line) => /^\s*(?:[-*•]|\d+[.)])\s+(.+)$/.exec(line)?.[1]?.trim())
    .filter((item): item is string => item !== undefined && item.length > 0);
}

function itemsAfterColon(prompt: string): string[] {
  const colon = prompt.indexOf(":");
  if (colon < 0) return [];
  return prompt
    .slice(colon + 1)
    .split(/[,;\n]|\bthen\b|\band\b/i)
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Cuts `text` to `max` characters, marking the cut with an ellipsis. */
export function shorten(text: string, max: number): string {
  return truncateText(text, max);
}

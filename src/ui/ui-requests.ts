import { z } from "zod";
import { CONTROL_COMMANDS } from "../bus/contract.js";
import { NAME_PATTERN } from "../bus/subjects.js";

/** The bodies the page posts; the server forwards them as chat and control requests of the NATS contract. */

const Name = z.string().regex(NAME_PATTERN, { error: `must match ${NAME_PATTERN.source}` });

/** `POST /api/chat`: a message for `agent`'s `session`. */
export const UiChatRequest = z.object({
  agent: Name,
  session: Name,
  text: z.string().min(1, { error: "must not be empty" }),
});
export type UiChatRequest = z.infer<typeof UiChatRequest>;

/**
 * `POST /api/control`: stop / new / compact [topic] / approve / deny (a held tool call) / cancel
 * (one chat request, by the `id` it was sent with) for one session.
 */
export const UiControlRequest = z
  .object({
    agent: Name,
    session: Name,
    command: z.enum(CONTROL_COMMANDS),
    topic: z.string().max(4096).optional(),
    toolCallId: z.string().min(1).max(256).optional(),
    reason: z.string().max(4096).optional(),
    arguments: z.string().optional(),
    /** The chat request a `cancel` is about: stopped if running, taken out of the queue if queued. */
    id: z.string().min(1, { error: "must not be empty" }).max(256).optional(),
  })
  .superRefine((request, context) => {
    // Refused here, with the field named, rather than after a round trip to the host.
    if (request.command === "cancel" && request.id === undefined) {
      context.addIssue({ code: "custom", path: ["id"], message: 'required by "cancel"' });
    }
  });
export type UiControlRequest = z.infer<typeof UiControlRequest>;

/** The first problem of a failed parse, as one readable line (`field "agent": must match …`). */
export function describeIssues(error: z.ZodError, input: unknown): string {
  const issue = error.issues[0];
  if (issue === undefined) return "invalid request";
  const field = issue.path.map(String).join(".");
  if (field === "") return issue.message;
  const isMissing =
    issue.path.length === 1 &&
    typeof input === "object" &&
    input !== null &&
    (input as Record<string, unknown>)[field] === undefined;
  return isMissing ? `missing field "${field}"` : `field "${field}": ${issue.message}`;
}

import { z } from "zod";

/**
 * Where a chat sits in a tree of agents asking agents (`ask_agent`): who asked it, who asked
 * first, how deep it is, which sessions are already waiting above it, and by when it must end.
 * It travels in one message header ({@link LINEAGE_HEADER}) on every path a question takes (the
 * NATS contract, the Agent Protocol), so whatever door a child chat comes in by, its host knows
 * the chain, refuses a question that would come back to a session already waiting on it (`cycle`)
 * and stamps the child's events with `parent` and `root`. A leaf module: it imports nothing of
 * agentloop.
 */

/** The header that carries a {@link ChatLineage} as JSON. */
export const LINEAGE_HEADER = "Agentloop-Lineage";

/** The W3C trace-context header: the child's spans join the asking tool call's trace. */
export const TRACEPARENT_HEADER = "traceparent";

/** Deepest chain a lineage may describe (its `depth`); the agents' own cap is lower. */
export const MAX_LINEAGE_DEPTH = 64;

const Name = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);
const Id = z.string().min(1).max(256);

/** One chat of the tree: its agent, session and chat id. */
export const ChatRef = z.object({ agent: Name, session: Name, chatId: Id });
export type ChatRef = z.infer<typeof ChatRef>;

/** The chat that asked, and the tool call that asked (absent from a caller that is not a chat). */
export const ParentRef = ChatRef.extend({ toolCallId: Id.optional() });
export type ParentRef = z.infer<typeof ParentRef>;

/** A session on the chain: an agent and one of its sessions. */
export const ChainLink = z.object({ agent: Name, session: Name });
export type ChainLink = z.infer<typeof ChainLink>;

/** A child chat's place in the tree, as its asker sends it. */
export const ChatLineage = z.object({
  /** The child's nesting depth: the asker's + 1. */
  depth: z.number().int().min(1).max(MAX_LINEAGE_DEPTH),
  /** Every session waiting above the child, the root first, the asker last. */
  chain: z.array(ChainLink).min(1).max(MAX_LINEAGE_DEPTH),
  parent: ParentRef,
  root: ChatRef,
  /** When the root's time runs out (ms since the epoch): the child is cancelled then. */
  deadline: z.number().int().positive().optional(),
});
export type ChatLineage = z.infer<typeof ChatLineage>;

/** What {@link readLineageHeaders} found: the lineage and trace parent, or why the header is refused. */
export type LineageRead =
  | { ok: true; lineage: ChatLineage | undefined; traceparent: string | undefined }
  | { ok: false; message: string };

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The headers that carry a child's lineage (and the asking span, when there is one). */
export function lineageHeaders(lineage: ChatLineage, traceparent?: string): Record<string, string> {
  return {
    [LINEAGE_HEADER]: JSON.stringify(lineage),
    ...(traceparent === undefined ? {} : { [TRACEPARENT_HEADER]: traceparent }),
  };
}

/**
 * Reads the lineage and trace parent from a message's headers (names matched without regard to
 * case: proxies and other clients may change it). No header: a chat nobody asked through
 * `ask_agent`. A lineage header that is not valid is refused (`bad_request` with this message),
 * never guessed at; a malformed `traceparent` is ignored, as W3C trace context says to.
 */
export function readLineageHeaders(headers: Readonly<Record<string, string>> | undefined): LineageRead {
  if (headers === undefined) return { ok: true, lineage: undefined, traceparent: undefined };
  let raw: string | undefined;
  let traceparent: string | undefined;
  for (const [key, value] of Object.entries(headers)) {
    const name = key.toLowerCase();
    if (name === LINEAGE_HEADER.toLowerCase()) raw = value;
    else if (name === TRACEPARENT_HEADER && TRACEPARENT.test(value.trim())) traceparent = value.trim();
  }
  if (raw === undefined) return { ok: true, lineage: undefined, traceparent };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return { ok: false, message: `header ${LINEAGE_HEADER} is not valid JSON` };
  }
  const parsed = ChatLineage.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? "" : ` (at ${issue.path.join(".")})`;
    return { ok: false, message: `header ${LINEAGE_HEADER} is not a valid lineage${where}` };
  }
  return { ok: true, lineage: parsed.data, traceparent };
}

/** Whether `agent`/`session` is already waiting on the chain: asking it again would wait on itself. */
export function isOnChain(chain: readonly ChainLink[], agent: string, session: string): boolean {
  return chain.some((link) => link.agent === agent && link.session === session);
}

/** The chain as text for an error message: `a/s1 → b/a-s1`. */
export function describeChain(chain: readonly ChainLink[]): string {
  return chain.map((link) => `${link.agent}/${link.session}`).join(" → ");
}

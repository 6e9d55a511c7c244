import type { SessionManager } from "../host/session-manager.js";
import type { ChatJournal } from "./chat-journal.js";

export interface ResumeUnfinishedParams {
  journal: ChatJournal;
  sessions: SessionManager;
  /** The agents this host serves: other agents' entries are left for their hosts. */
  agents: readonly string[];
  /** Which sessions to take (e.g. the ones whose lease this host just acquired). Default: all. */
  filter?: (agent: string, session: string) => boolean;
  /** One-line notices (a session that cannot be activated). */
  log?: (line: string) => void;
}

/**
 * Issue 11: activates every journaled session (of this host's agents) and resumes what it left
 * unfinished — its running chat, then its queued chats, in order — without waiting for a new
 * message. What `serve` does at start; a host taking over a session calls it with a `filter`.
 * Resolves with the number of sessions resumed, once their resumed chats have run.
 */
export async function resumeUnfinished(params: ResumeUnfinishedParams): Promise<number> {
  const { journal, sessions, log = () => {} } = params;
  const served = new Set(params.agents);
  let entries: Awaited<ReturnType<ChatJournal["list"]>>;
  try {
    entries = await journal.list();
  } catch (error) {
    log(`cannot read the chat journal: ${describe(error)}; unfinished chats are not resumed`);
    return 0;
  }
  const resumed = await Promise.all(
    entries
      .filter(({ agent, session }) => served.has(agent) && (params.filter?.(agent, session) ?? true))
      .map(async ({ agent, session }) => {
        try {
          await sessions.use(agent, session, (actor) => actor.resumeUnfinished());
          return 1;
        } catch (error) {
          log(`cannot resume session ${agent}/${session}: ${describe(error)}`);
          return 0;
        }
      }),
  );
  return resumed.reduce<number>((sum, count) => sum + count, 0);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

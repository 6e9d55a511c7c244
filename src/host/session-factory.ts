import type { Agent } from "../agent/agent-types.js";
import type { ChatReply } from "../bus/contract.js";
import type { LeaseFence } from "../cluster/lease-fence.js";
import type { SessionCluster } from "../cluster/session-cluster.js";
import type { ResumeCounts } from "../journal/resume-counts.js";
import { describeFailure } from "./describe-failure.js";
import { type ChatOutcome, SessionActor } from "./session-actor.js";

/** What the host hands an agent factory: the session's mailbox, for ToolContext.post. */
export interface SessionHooks {
  post(text: string, options?: { type?: string; stackable?: boolean }): void;
  /** With a cluster: the session's lease, checked before every history write and model request. */
  fence?: LeaseFence;
}

/** Builds the agent of one session, restoring its history (see create-session-agent.ts). */
export type SessionAgentFactory = (agent: string, session: string, hooks: SessionHooks) => Promise<Agent>;

/** Builds one live session; what {@link SessionManager} calls on a session's first use. */
export type SessionFactory = (agent: string, session: string) => Promise<SessionActor>;

export interface SessionFactoryOptions {
  createAgent: SessionAgentFactory;
  /** With a cluster, a session is built only under its shard's lease, held here; its journal's request ids are adopted. */
  cluster?: SessionCluster;
  /** Mailbox limit per session; default 200. */
  maxQueue?: number;
  /** Bytes one session's messages may hold (see {@link SessionActorOptions.maxSessionBytes}). */
  maxSessionBytes?: number;
  now?: () => number;
  /** Where a session that starts with unfinished journal work is counted. */
  resumeCounts?: ResumeCounts;
  /** One line per session that could not be built, or whose resumed chat's reply was not stored. */
  log?: (line: string) => void;
}

/**
 * The host's session factory, handed to its {@link SessionManager} at construction: takes the
 * session's lease (with a cluster), builds its agent and {@link SessionActor}, and starts what the
 * session's last host left unfinished (its journal). Nothing here calls back into the host.
 *
 * @example
 * const sessions = new SessionManager({ createSession: createSessionFactory({ createAgent }) });
 */
export function createSessionFactory(options: SessionFactoryOptions): SessionFactory {
  const { createAgent, cluster, maxQueue, maxSessionBytes, now } = options;
  const log = options.log ?? (() => {});
  return async (agent, session) => {
    let actor: SessionActor | undefined;
    const hooks: SessionHooks = {
      // Posts before the actor exists cannot happen (tools run inside chats), but stay harmless.
      post: (text, postOptions) => actor?.post(text, postOptions),
    };
    // The session runs here only under its shard's lease, held here (else SessionOwnedElsewhereError).
    if (cluster !== undefined) hooks.fence = await cluster.fenceFor(agent, session);
    try {
      const created = await createAgent(agent, session, hooks);
      actor = new SessionActor({
        agent: created,
        ...(maxQueue === undefined ? {} : { maxQueue }),
        ...(now === undefined ? {} : { now }),
        ...(maxSessionBytes === undefined ? {} : { maxSessionBytes }),
      });
      // What the session's last host left unfinished (its journal) runs first; a resumed chat with
      // a client request id answers that id's retries, and its reply is stored for later ones.
      const dedupe = cluster?.dedupe;
      const journal = created.journal;
      if (
        journal !== undefined &&
        (journal.unfinishedChat !== null || journal.queued.length > 0 || journal.answered.length > 0)
      ) {
        options.resumeCounts?.record(agent, session);
      }
      void actor.resumeUnfinished(
        dedupe === undefined
          ? {}
          : {
              onResumed: (id, outcome) => {
                const reply = outcome.then((answer) => answer && chatReplyOf(session, answer, { id }));
                void dedupe.adopt(agent, session, id, reply).then(
                  () => journal?.forgetAnswer(id),
                  (error: unknown) =>
                    log(
                      `could not answer request ${id} of ${agent}/${session}: ${describeFailure(error).message}`,
                    ),
                );
              },
            },
      );
      return actor;
    } catch (error) {
      log(`could not start session ${agent}/${session}: ${describeFailure(error).message}`);
      throw error;
    }
  };
}

/** A chat's outcome as the reply to its request (`echo`: the request's `id`, if it had one). */
export function chatReplyOf(session: string, outcome: ChatOutcome, echo: { id?: string }): ChatReply {
  return outcome.ok
    ? { ok: true, session, result: outcome.result, usage: outcome.usage, ...echo }
    : { ok: false, error: outcome.error, ...echo };
}

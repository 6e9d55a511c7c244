import { DEFAULT_SHARD_COUNT, preferredOwner, shardOf } from "../../src/cluster/shard-map.js";

/**
 * A session name (`<stem>`, else `<stem>-1`, `<stem>-2` …) whose shard prefers `host` among `hosts`:
 * once the hosts have balanced, that host owns it. For black-box tests that must know which of
 * several `serve` processes runs a session.
 */
export function sessionPreferring(
  host: string,
  hosts: readonly string[],
  options: { stem?: string; agent?: string; shards?: number } = {},
): string {
  const { stem = "s1", agent = "assistant", shards = DEFAULT_SHARD_COUNT } = options;
  const members = [...hosts].sort();
  for (let index = 0; ; index++) {
    const session = index === 0 ? stem : `${stem}-${index}`;
    if (preferredOwner(shardOf(agent, session, shards), members) === host) return session;
  }
}

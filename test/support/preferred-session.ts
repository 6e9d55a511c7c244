import type { Bus } from "../../src/bus/bus.js";
import { hostSubject } from "../../src/cluster/session-cluster.js";
import { assignShards, DEFAULT_SHARD_COUNT, preferredOwner, shardOf } from "../../src/cluster/shard-map.js";

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

/**
 * Waits until each host holds exactly the shards that prefer it (no hand-over left to do), asking
 * each on `<prefix>.hosts.<host>.sessions`: traffic sent before may see its session move.
 */
export async function untilShardsBalanced(
  bus: Bus,
  prefix: string,
  hostIds: readonly string[],
  timeoutMs = 60_000,
): Promise<void> {
  const assignment = assignShards(DEFAULT_SHARD_COUNT, [...hostIds]);
  const expected = hostIds.map((id) => assignment.filter((owner) => owner === id).length);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // A host slow to answer (a loaded machine) counts as not balanced yet; the deadline decides.
    const held = await Promise.all(
      hostIds.map(async (id) => {
        try {
          const reply = await bus.request(`${hostSubject(prefix, id)}.sessions`, "", { timeoutMs: 5_000 });
          return (JSON.parse(reply.data) as { shards?: number }).shards;
        } catch {
          return undefined;
        }
      }),
    );
    if (held.every((count, index) => count === expected[index])) return;
    if (Date.now() > deadline) {
      throw new Error(`the hosts did not balance: ${held.join(", ")} of ${expected.join(", ")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

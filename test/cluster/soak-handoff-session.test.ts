import { describe, expect, it } from "vitest";
import { sessionMovingTo } from "../../bench/soak/failover-soak.js";
import { assignShards, DEFAULT_SHARD_COUNT, shardOf } from "../../src/cluster/shard-map.js";

/** The hand-off kill points need a session whose shard moves to the joining host. */
describe("the soak's choice of a session for a hand-off", () => {
  const members = ["h1g0", "h2g1", "h3g2"];

  it("picks a session whose shard the shard map gives to the joiner once it is a member", () => {
    for (const joiner of ["h4g3", "h4g9", "a-first-by-name"]) {
      const session = sessionMovingTo(joiner, members, `soak-7-${joiner}`);
      const shard = shardOf("assistant", session, DEFAULT_SHARD_COUNT);
      const before = assignShards(DEFAULT_SHARD_COUNT, members)[shard];
      const after = assignShards(DEFAULT_SHARD_COUNT, [...members, joiner])[shard];
      expect(after).toBe(joiner);
      expect(members).toContain(before);
      expect(session.startsWith(`soak-7-${joiner}`)).toBe(true);
    }
  });

  it("keeps the plain name when its shard already moves", () => {
    const joiner = "h4g3";
    const session = sessionMovingTo(joiner, members, "soak-1-1");
    expect(sessionMovingTo(joiner, members, session)).toBe(session);
  });
});

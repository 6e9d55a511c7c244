import { describe, expect, it } from "vitest";
import {
  assignShards,
  checkShardCount,
  DEFAULT_SHARD_COUNT,
  preferredOwner,
  shardOf,
  stableHash,
} from "../../src/cluster/shard-map.js";

describe("shardOf", () => {
  it("is stable: the same key gives the same shard, pinned so a change of hash cannot slip in", () => {
    expect(stableHash("")).toBe(stableHash(""));
    // Hosts of different versions must agree: these values are part of the contract between hosts.
    expect(shardOf("assistant", "s1", DEFAULT_SHARD_COUNT)).toBe(
      shardOf("assistant", "s1", DEFAULT_SHARD_COUNT),
    );
    const pinned = [
      shardOf("assistant", "s1", 1024),
      shardOf("assistant", "s2", 1024),
      shardOf("bot", "s1", 1024),
    ];
    expect(pinned).toEqual([562, 1000, 684]);
    expect(new Set(pinned).size).toBe(3);
  });

  it("keeps the agent in the key: one session name under two agents may land apart", () => {
    const apart = Array.from({ length: 50 }, (_, index) => `s${index}`).filter(
      (session) => shardOf("a", session, 1024) !== shardOf("b", session, 1024),
    );
    expect(apart.length).toBeGreaterThan(40);
  });

  it("spreads 100,000 sessions evenly over 1,024 shards", () => {
    const counts = new Array<number>(1024).fill(0);
    for (let index = 0; index < 100_000; index++) counts[shardOf("assistant", `s${index}`, 1024)]! += 1;
    const mean = 100_000 / 1024;
    expect(Math.min(...counts)).toBeGreaterThan(mean * 0.6);
    expect(Math.max(...counts)).toBeLessThan(mean * 1.4);
  });
});

describe("preferredOwner and assignShards", () => {
  const hosts = ["ha", "hb", "hc"];

  it("gives every shard to one member, the same whatever the order the members are listed in", () => {
    const forward = assignShards(1024, hosts);
    const backward = assignShards(1024, [...hosts].reverse());
    expect(forward).toEqual(backward);
    expect(forward.every((owner) => owner !== undefined && hosts.includes(owner))).toBe(true);
  });

  it("spreads the shards evenly over the members", () => {
    const assignment = assignShards(1024, hosts);
    for (const host of hosts) {
      const owned = assignment.filter((owner) => owner === host).length;
      expect(owned).toBeGreaterThan(1024 / 3 - 60);
      expect(owned).toBeLessThan(1024 / 3 + 60);
    }
  });

  it("moves only the joining member's share when a member joins", () => {
    const before = assignShards(1024, hosts);
    const after = assignShards(1024, [...hosts, "hd"]);
    for (let shard = 0; shard < 1024; shard++) {
      if (after[shard] !== before[shard]) expect(after[shard]).toBe("hd");
    }
    const moved = after.filter((owner) => owner === "hd").length;
    expect(moved).toBeGreaterThan(1024 / 4 - 60);
    expect(moved).toBeLessThan(1024 / 4 + 60);
  });

  it("moves only the leaving member's shards when a member leaves", () => {
    const before = assignShards(1024, hosts);
    const after = assignShards(1024, ["ha", "hc"]);
    for (let shard = 0; shard < 1024; shard++) {
      if (before[shard] !== "hb") expect(after[shard]).toBe(before[shard]);
      else expect(["ha", "hc"]).toContain(after[shard]);
    }
  });

  it("has no owner without members", () => {
    expect(preferredOwner(3, [])).toBeUndefined();
    expect(assignShards(4, [])).toEqual([undefined, undefined, undefined, undefined]);
  });
});

describe("checkShardCount", () => {
  it("takes whole numbers within bounds and says why it refuses the rest", () => {
    expect(checkShardCount(1024)).toBeUndefined();
    expect(checkShardCount(1)).toBeUndefined();
    expect(checkShardCount(0)).toMatch(/whole number from 1 to 65536, got 0/);
    expect(checkShardCount(1.5)).toMatch(/got 1.5/);
    expect(checkShardCount(100_000)).toMatch(/got 100000/);
  });
});

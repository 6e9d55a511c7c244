import { describe, expect, it } from "vitest";
import { clusterSettingsFrom } from "../../src/cli/cluster-settings.js";
import { DEFAULT_LEASE_SKEW_MS, leaseTiming } from "../../src/cluster/session-lease.js";

/**
 * The clock error tolerated between hosts: 500 ms by default (a fifth of the TTL when that is less),
 * `--lease-skew` to change it, never more than a third of the TTL.
 */
describe("the lease skew", () => {
  it("is 500 ms at the default TTL, a fifth of a short TTL, and what is asked otherwise", () => {
    expect(leaseTiming()).toEqual({ ttlMs: 10_000, skewMs: DEFAULT_LEASE_SKEW_MS });
    expect(DEFAULT_LEASE_SKEW_MS).toBe(500);
    expect(leaseTiming(1_500)).toEqual({ ttlMs: 1_500, skewMs: 300 });
    expect(leaseTiming(10_000, 2_000)).toEqual({ ttlMs: 10_000, skewMs: 2_000 });
  });

  it("refuses a skew over a third of the TTL, or below zero", () => {
    expect(() => leaseTiming(3_000, 1_001)).toThrow(/lease skew must be from 0 to a third of the lease ttl/);
    expect(() => leaseTiming(3_000, -1)).toThrow(RangeError);
  });

  it("is read from --lease-skew or AGENTLOOP_LEASE_SKEW and checked against the TTL", () => {
    expect(clusterSettingsFrom({ "lease-skew": "250ms" }, {})).toEqual({ leaseSkewMs: 250 });
    expect(clusterSettingsFrom({}, { AGENTLOOP_LEASE_SKEW: "1s" })).toEqual({ leaseSkewMs: 1_000 });
    expect(() => clusterSettingsFrom({ "lease-skew": "4s" }, {})).toThrow(
      '--lease-skew must be between 1ms and a third of --lease-ttl, got "4s"',
    );
    expect(clusterSettingsFrom({ "lease-skew": "4s", "lease-ttl": "30s" }, {})).toEqual({
      leaseTtlMs: 30_000,
      leaseSkewMs: 4_000,
    });
  });
});

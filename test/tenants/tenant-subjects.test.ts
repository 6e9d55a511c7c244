import { describe, expect, it } from "vitest";
import {
  jetStreamName,
  parseRequestSubject,
  subjectMatches,
  tenantOf,
  tenantPrefix,
  tenantRequestsPattern,
} from "../../src/bus/subjects.js";
import { TenantsSection } from "../../src/config/tenant-limits.js";
import { tenantDatabasePath } from "../../src/host/host-service.js";

describe("tenant subjects", () => {
  it("put a tenant's requests under <prefix>.tenant.<tenant>, matched by one pattern per verb", () => {
    const prefix = tenantPrefix("agentloop", "A");
    expect(prefix).toBe("agentloop.tenant.A");
    expect(parseRequestSubject(prefix, "agentloop.tenant.A.agents.bot.chat")).toEqual({
      agent: "bot",
      verb: "chat",
    });
    expect(
      subjectMatches(tenantRequestsPattern("agentloop", "chat"), "agentloop.tenant.A.agents.bot.chat"),
    ).toBe(true);
    expect(subjectMatches(tenantRequestsPattern("agentloop", "chat"), "agentloop.agents.bot.chat")).toBe(
      false,
    );
    // Forwarding between hosts stays within the tenant, and out of the tenant's request pattern.
    expect(
      subjectMatches(tenantRequestsPattern("agentloop", "chat"), `${prefix}.hosts.h1.agents.bot.chat`),
    ).toBe(false);
  });

  it("reads the tenant token, and refuses one that cannot be a tenant name", () => {
    expect(tenantOf("agentloop", "agentloop.tenant.acme-1.agents.bot.chat")).toEqual({ tenant: "acme-1" });
    expect(tenantOf("agentloop", "agentloop.agents.bot.chat")).toBeUndefined();
    expect(tenantOf("agentloop", "agentloop.tenant.a:b.agents.bot.chat")?.invalid).toMatch(
      /invalid tenant name "a:b"/,
    );
    expect(tenantOf("agentloop", `agentloop.tenant.${"x".repeat(65)}.agents.bot.chat`)?.invalid).toMatch(
      /invalid tenant name/,
    );
  });

  it("names a tenant's streams and buckets apart, keeping the tenant's case; untenanted names are unchanged", () => {
    expect(jetStreamName("agentloop", "REPLIES")).toBe("AGENTLOOP_REPLIES");
    expect(jetStreamName(tenantPrefix("agentloop", "A"), "REPLIES")).toBe("AGENTLOOP_TENANT_A_REPLIES");
    expect(jetStreamName(tenantPrefix("agentloop", "acme"), "SESSIONS")).not.toBe(
      jetStreamName(tenantPrefix("agentloop", "ACME"), "SESSIONS"),
    );
    expect(jetStreamName(tenantPrefix("acme.al", "t_1"), "JOURNAL")).toBe("ACME_AL_TENANT_t_1_JOURNAL");
  });

  it("puts a tenant's SQLite histories in a file of its own next to --db", () => {
    expect(tenantDatabasePath("/data/chats.db", "A")).toBe("/data/chats.tenant-A.db");
    expect(tenantDatabasePath("chats", "B")).toBe("chats.tenant-B");
  });

  it("reads the agents file's tenants section, refusing unknown fields and bad names", () => {
    expect(
      TenantsSection.parse({ A: { maxSessions: 100, tokenBudget: { tokens: 100000, per: "day" } }, B: {} }),
    ).toEqual({ A: { maxSessions: 100, tokenBudget: { tokens: 100000, per: "day" } }, B: {} });
    expect(TenantsSection.safeParse({ A: { maxSesions: 1 } }).success).toBe(false);
    expect(TenantsSection.safeParse({ "a.b": {} }).success).toBe(false);
    expect(TenantsSection.safeParse({ A: { tokenBudget: { tokens: 10, per: "week" } } }).success).toBe(false);
  });
});

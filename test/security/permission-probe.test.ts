import { describe, expect, it } from "vitest";
import { grantFor } from "../../src/bus/nats-permission-error.js";
import { isProbeMessage, PROBE_HEADER } from "../../src/bus/probe-message.js";
import { isValidName, isValidSubject } from "../../src/bus/subjects.js";
import { hostPublishProbes } from "../../src/host/permission-check.js";

/** The subjects a host probes at start, and the allow entry named for each refused one. */

describe("hostPublishProbes", () => {
  it("probes each publish family once per agent, JetStream's only when it is used", () => {
    expect(
      hostPublishProbes({
        prefix: "agentloop",
        agents: ["a", "b"],
        usesJetStream: false,
        historyOnNats: false,
      }),
    ).toEqual([
      "agentloop.events.a.$probe.PermissionProbe",
      "agentloop.sessions.a.$probe.heartbeat",
      "agentloop.events.b.$probe.PermissionProbe",
      "agentloop.sessions.b.$probe.heartbeat",
      "agentloop.hosts.$probe.agents.a.chat",
      "agentloop.serving.$probe.chat",
    ]);
    const withHistory = hostPublishProbes({
      prefix: "acme.bots",
      agents: ["a"],
      usesJetStream: true,
      historyOnNats: true,
    });
    expect(withHistory).toContain("$KV.ACME_BOTS_SHARDS.$probe");
    expect(withHistory).toContain("$KV.ACME_BOTS_MEMBERS.$probe");
    expect(withHistory).toContain("$KV.ACME_BOTS_REPLIES.$probe");
    expect(withHistory).toContain("acme.bots.history.a.$probe");
    expect(withHistory).toContain("$KV.ACME_BOTS_JOURNAL.$probe");
  });

  it("uses subjects no real session, host or agent can have", () => {
    const probes = hostPublishProbes({
      prefix: "agentloop",
      agents: ["a"],
      usesJetStream: true,
      historyOnNats: true,
    });
    for (const subject of probes) {
      expect(isValidSubject(subject)).toBe(true);
      expect(subject.split(".")).toContain("$probe");
    }
    expect(isValidName("$probe")).toBe(false);
  });
});

describe("grantFor", () => {
  it.each([
    ["agentloop.sessions.a.$probe.heartbeat", "agentloop.sessions.>"],
    ["acme.bots.events.a.$probe.PermissionProbe", "acme.bots.events.>"],
    ["agentloop.agents.*.chat", "agentloop.agents.*.chat"],
    ["$JS.API.INFO", "$JS.API.>"],
    ["$KV.AGENTLOOP_SESSIONS.$probe", "$KV.AGENTLOOP_SESSIONS.>"],
    ["$SRV.PING", "$SRV.>"],
    ["_INBOX_host.abc", "_INBOX_host.>"],
    ["acme.inbox.abc.*", "acme.inbox.>"],
  ])("%s → %s", (subject, grant) => {
    const prefix = subject.startsWith("acme.bots") ? "acme.bots" : "agentloop";
    expect(grantFor(subject, prefix)).toBe(grant);
  });
});

describe("isProbeMessage", () => {
  it("tells a probe by its header", () => {
    expect(isProbeMessage({ headers: { [PROBE_HEADER]: "permissions" } })).toBe(true);
    expect(isProbeMessage({ headers: { other: "x" } })).toBe(false);
    expect(isProbeMessage({})).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { createTextCollector, pickAgent } from "../../src/protocol/agent-client.js";
import { toAgentListings } from "../../src/protocol/agent-directory.js";
import { type DiscoveredAgent, matchesTarget, toDiscoveredAgent } from "../../src/protocol/discovery.js";
import { isOnline } from "../../src/protocol/heartbeat-watch.js";
import {
  isProtocolToken,
  parseProtocolSubject,
  protocolSubjectOf,
} from "../../src/protocol/protocol-subjects.js";
import {
  Heartbeat,
  isNoResponders,
  parseJson,
  parseReplyChunk,
  ServiceInfo,
} from "../../src/protocol/wire.js";

describe("subject tokens (§2)", () => {
  it("accepts plain tokens and refuses dots, wildcards, whitespace, NUL and a leading $", () => {
    for (const token of ["claude-code", "acme", "s_1", "MixedCase"]) {
      expect(isProtocolToken(token)).toBe(true);
    }
    for (const token of ["", "a.b", "*", "a>", "a b", "tab\t", "nul\u0000", "$SYS", 42, undefined]) {
      expect(isProtocolToken(token)).toBe(false);
    }
  });

  it("builds and reads agents.<verb>.<agent>.<owner>.<name>", () => {
    const address = { agent: "bot", owner: "acme", name: "s1" };
    expect(protocolSubjectOf("prompt", address)).toBe("agents.prompt.bot.acme.s1");
    expect(protocolSubjectOf("hb", { ...address, owner: "a.b" })).toBeUndefined();
    expect(parseProtocolSubject("agents.hb.bot.acme.s1")).toEqual({ verb: "hb", ...address });
    expect(parseProtocolSubject("agents.chat.bot.acme.s1")).toBeUndefined();
    expect(parseProtocolSubject("agents.prompt.bot.acme")).toBeUndefined();
    expect(parseProtocolSubject("agentloop.agents.bot.chat")).toBeUndefined();
  });
});

describe("reply chunks (§6, §9)", () => {
  it("reads status, both response forms and query", () => {
    expect(parseReplyChunk('{"type":"status","data":"ack"}', undefined)).toEqual({
      type: "status",
      status: "ack",
    });
    expect(parseReplyChunk('{"type":"response","data":"hi"}', {})).toEqual({ type: "response", text: "hi" });
    expect(parseReplyChunk('{"type":"response","data":{"text":"hi","attachments":[]}}', undefined)).toEqual({
      type: "response",
      text: "hi",
    });
    expect(
      parseReplyChunk(
        '{"type":"query","data":{"id":"q","reply_subject":"_INBOX.x","prompt":"which?"}}',
        undefined,
      ),
    ).toEqual({ type: "query", id: "q", replySubject: "_INBOX.x", prompt: "which?" });
  });

  it("ends at an empty message without headers only", () => {
    expect(parseReplyChunk("", undefined)).toEqual({ type: "end" });
    expect(parseReplyChunk("", {})).toEqual({ type: "end" });
    expect(parseReplyChunk("", { "X-Other": "1" }).type).toBe("ignored");
  });

  it("turns the error headers into an error, whatever the body", () => {
    expect(
      parseReplyChunk('{"detail":1}', {
        "Nats-Service-Error-Code": "403",
        "Nats-Service-Error": "not yours",
      }),
    ).toEqual({ type: "error", code: 403, description: "not yours" });
    expect(parseReplyChunk("", { "nats-service-error-code": "500" })).toEqual({
      type: "error",
      code: 500,
      description: "the agent reported an error",
    });
  });

  it("ignores unknown types and what is not a chunk", () => {
    expect(parseReplyChunk('{"type":"thinking","data":"x"}', undefined)).toEqual({
      type: "ignored",
      reason: 'chunk type "thinking"',
    });
    expect(parseReplyChunk("plain text", undefined).type).toBe("ignored");
    expect(parseReplyChunk('{"type":"response","data":42}', undefined).type).toBe("ignored");
    expect(parseReplyChunk('{"type":"query","data":{"prompt":"no reply subject"}}', undefined).type).toBe(
      "ignored",
    );
  });

  it("recognises the no-responders status", () => {
    expect(isNoResponders({ data: new Uint8Array(), headers: { code: 503 } })).toBe(true);
    expect(isNoResponders({ data: new Uint8Array([1]), headers: { code: 503 } })).toBe(false);
    expect(isNoResponders({ data: new Uint8Array() })).toBe(false);
  });
});

function discovered(overrides: Partial<DiscoveredAgent> = {}): DiscoveredAgent {
  return {
    id: "ID1",
    agent: "bot",
    owner: "acme",
    name: "s1",
    protocolVersion: "0.3",
    promptSubject: "agents.prompt.bot.acme.s1",
    endpoints: [{ name: "prompt", subject: "agents.prompt.bot.acme.s1" }],
    metadata: {},
    ...overrides,
  };
}

describe("discovery records and targets", () => {
  it("reads an agents service info, keeping unknown metadata, and skips other services", () => {
    const info = ServiceInfo.parse({
      name: "agents",
      id: "ID1",
      version: "0.3.0",
      metadata: { agent: "bot", owner: "acme", protocol_version: "0.3", extra: "kept" },
      endpoints: [
        { name: "prompt", subject: "agents.prompt.bot.acme.inst-7", queue_group: "agents" },
        { name: "status", subject: "agents.status.bot.acme.inst-7" },
      ],
    });
    expect(toDiscoveredAgent(info)).toMatchObject({
      id: "ID1",
      agent: "bot",
      owner: "acme",
      // No session metadata: the prompt subject's 5th token names the instance.
      name: "inst-7",
      promptSubject: "agents.prompt.bot.acme.inst-7",
      metadata: { extra: "kept" },
    });
    expect(toDiscoveredAgent({ ...info, name: "billing" })).toBeUndefined();
    expect(ServiceInfo.safeParse({ name: "agents" }).success).toBe(false);
  });

  it("matches a name by session metadata or by the subject's instance token", () => {
    const agent = discovered({ name: "session-9" });
    expect(matchesTarget(agent, { name: "session-9" })).toBe(true);
    expect(matchesTarget(agent, { name: "s1" })).toBe(true);
    expect(matchesTarget(agent, { agent: "bot", owner: "acme" })).toBe(true);
    expect(matchesTarget(agent, { owner: "other" })).toBe(false);
    expect(matchesTarget(agent, {})).toBe(true);
  });

  it("picks one agent: instances of one subject are one agent, different subjects are ambiguous", () => {
    const twin = discovered({ id: "ID2" });
    expect(pickAgent([discovered(), twin], { agent: "bot" }).id).toBe("ID1");
    const other = discovered({ id: "ID3", name: "s2", promptSubject: "agents.prompt.bot.acme.s2" });
    expect(() => pickAgent([discovered(), other], { agent: "bot" })).toThrow(/matches 2 agents/);
    expect(() => pickAgent([discovered({ promptSubject: undefined })], {})).toThrow(
      /no protocol agent matches/,
    );
  });
});

describe("createTextCollector", () => {
  it("keeps short text whole and cuts long text within the limit with the marker", () => {
    const short = createTextCollector(100);
    short.append("ab");
    short.append("cd");
    expect(short.text()).toBe("abcd");
    const long = createTextCollector(100);
    for (let index = 0; index < 50; index++) long.append("0123456789");
    const text = long.text();
    expect(text.length).toBeLessThanOrEqual(100);
    expect(text).toMatch(/^0123456789.*\n…\[truncated: 500 characters, showing the first \d+\]$/s);
  });

  it("never cuts between the halves of a surrogate pair", () => {
    const collector = createTextCollector(3);
    collector.append("ab😀");
    collector.append("c");
    const text = collector.text();
    expect(text.isWellFormed()).toBe(true);
  });
});

describe("agent listings", () => {
  const heartbeat = {
    agent: "bot",
    owner: "acme",
    session: "s1",
    instance_id: "ID1",
    ts: "t",
    interval_s: 2,
  };

  it("reads interval_s as the reference decoders do: a whole number of seconds, at least 1", () => {
    expect(parseJson(Heartbeat, JSON.stringify(heartbeat))?.interval_s).toBe(2);
    for (const interval of [1.5, 0, -1, "2"]) {
      expect(parseJson(Heartbeat, JSON.stringify({ ...heartbeat, interval_s: interval }))).toBeUndefined();
    }
  });

  it("counts an instance online while its heartbeat is younger than 3 × interval", () => {
    const sighting = { address: { agent: "bot", owner: "acme", name: "s1" }, heartbeat, receivedAt: 1_000 };
    expect(isOnline(sighting, 6_999)).toBe(true);
    expect(isOnline(sighting, 7_000)).toBe(false);
  });

  it("joins discovery and heartbeats by instance id; no heartbeat is offline", () => {
    const sighting = { address: { agent: "bot", owner: "acme", name: "s1" }, heartbeat, receivedAt: 1_000 };
    const stray = {
      address: { agent: "zed", owner: "acme", name: "x" },
      heartbeat: { ...heartbeat, agent: "zed", session: undefined, instance_id: "ID9" },
      receivedAt: 1_500,
    };
    const listings = toAgentListings(
      [discovered(), discovered({ id: "ID2", name: "s2", promptSubject: "agents.prompt.bot.acme.s2" })],
      [sighting, stray],
      2_000,
    );
    expect(listings.map(({ name, state, isDiscovered }) => ({ name, state, isDiscovered }))).toEqual([
      { name: "s1", state: "online", isDiscovered: true },
      { name: "s2", state: "offline", isDiscovered: true },
      { name: "x", state: "online", isDiscovered: false },
    ]);
    expect(listings[0]).toMatchObject({ lastHeartbeatS: 1, intervalS: 2 });
  });
});

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  agentRequestsPattern,
  allEventsPattern,
  chatSubject,
  controlSubject,
  DEFAULT_PREFIX,
  eventSubject,
  isValidName,
  isValidPattern,
  isValidPrefix,
  isValidSubject,
  jetStreamName,
  NAME_PATTERN,
  parseRequestSubject,
  sessionEventsPattern,
  subjectMatches,
} from "../../src/bus/subjects.js";

describe("subject builders", () => {
  it("build the v1 contract subjects", () => {
    expect(DEFAULT_PREFIX).toBe("agentloop");
    expect(chatSubject("agentloop", "bot")).toBe("agentloop.agents.bot.chat");
    expect(controlSubject("agentloop", "bot")).toBe("agentloop.agents.bot.control");
    expect(eventSubject("agentloop", "bot", "s42", "ModelTextDelta")).toBe(
      "agentloop.events.bot.s42.ModelTextDelta",
    );
    expect(agentRequestsPattern("agentloop")).toBe("agentloop.agents.*.*");
    expect(allEventsPattern("agentloop")).toBe("agentloop.events.>");
    expect(sessionEventsPattern("agentloop", "bot")).toBe("agentloop.events.bot.*.>");
    expect(sessionEventsPattern("agentloop", undefined, "s42")).toBe("agentloop.events.*.s42.>");
  });

  it("use the given prefix, also a multi-token one", () => {
    expect(chatSubject("acme.al", "bot")).toBe("acme.al.agents.bot.chat");
    expect(eventSubject("x", "a", "s", "ChatCompleted")).toBe("x.events.a.s.ChatCompleted");
    expect(isValidPrefix("acme.al")).toBe(true);
    expect(isValidPrefix("acme.*")).toBe(false);
    expect(isValidPrefix("")).toBe(false);
  });
});

describe("jetStreamName", () => {
  it("names every stream and bucket the same way: AGENTLOOP_<SUFFIX>, or the prefix upper-cased", () => {
    expect(jetStreamName(DEFAULT_PREFIX, "EVENTS")).toBe("AGENTLOOP_EVENTS");
    expect(jetStreamName("agentloop", "JOURNAL")).toBe("AGENTLOOP_JOURNAL");
    // Dots and other characters a stream name may not hold become `_`; `-` stays.
    expect(jetStreamName("acme.al-1", "SESSIONS")).toBe("ACME_AL-1_SESSIONS");
    expect(jetStreamName("a.b", "HISTORY")).not.toBe(jetStreamName("a.c", "HISTORY"));
  });
});

describe("parseRequestSubject", () => {
  it.each([
    ["agentloop.agents.bot.chat", { agent: "bot", verb: "chat" }],
    ["agentloop.agents.my_Bot-2.control", { agent: "my_Bot-2", verb: "control" }],
    ["agentloop.agents.bot.events", undefined],
    ["agentloop.agents.bot", undefined],
    ["agentloop.agents.bot.chat.extra", undefined],
    ["agentloop.agents..chat", undefined],
    ["other.agents.bot.chat", undefined],
    ["agentloopx.agents.bot.chat", undefined],
    ["agentloop.events.bot.chat", undefined],
    [`agentloop.agents.${"a".repeat(65)}.chat`, undefined],
  ])("%s → %o", (subject, expected) => {
    expect(parseRequestSubject("agentloop", subject)).toEqual(expected);
  });

  it("honours a multi-token prefix", () => {
    expect(parseRequestSubject("acme.al", "acme.al.agents.bot.chat")).toEqual({ agent: "bot", verb: "chat" });
    expect(parseRequestSubject("acme.al", "agentloop.agents.bot.chat")).toBeUndefined();
  });

  it("reads back every subject chatSubject and controlSubject build", () => {
    fc.assert(
      fc.property(fc.stringMatching(NAME_PATTERN), fc.constantFrom("chat", "control"), (agent, verb) => {
        const subject =
          verb === "chat" ? chatSubject("agentloop", agent) : controlSubject("agentloop", agent);
        expect(parseRequestSubject("agentloop", subject)).toEqual({ agent, verb });
      }),
    );
  });
});

describe("names", () => {
  it.each([
    ["bot", true],
    ["A-b_9", true],
    ["x".repeat(64), true],
    ["x".repeat(65), false],
    ["", false],
    ["a.b", false],
    ["a*", false],
    [">", false],
    ["a b", false],
    ["émile", false],
    ["a\n", false],
  ])("isValidName(%j) = %s", (name, expected) => {
    expect(isValidName(name)).toBe(expected);
  });

  it("rejects non-strings", () => {
    expect(isValidName(42)).toBe(false);
    expect(isValidName(undefined)).toBe(false);
  });
});

describe("subjectMatches", () => {
  it.each([
    ["a.b.c", "a.b.c", true],
    ["a.b.c", "a.b", false],
    ["a.b", "a.b.c", false],
    ["a.*", "a.b", true],
    ["a.*", "a", false],
    ["a.*", "a.b.c", false],
    ["*.b", "a.b", true],
    ["*", "a", true],
    ["*", "a.b", false],
    ["a.*.c", "a.x.c", true],
    ["a.*.c", "a.x.d", false],
    ["a.>", "a.b", true],
    ["a.>", "a.b.c.d", true],
    ["a.>", "a", false],
    [">", "a", true],
    [">", "a.b.c", true],
    ["a.*.>", "a.b", false],
    ["a.*.>", "a.b.c", true],
    ["agentloop.events.>", "agentloop.events.bot.s1.ModelTextDelta", true],
    ["agentloop.events.bot.*.ChatCompleted", "agentloop.events.bot.s1.ChatCompleted", true],
    ["agentloop.events.bot.*.ChatCompleted", "agentloop.events.bot.s1.ChatFailed", false],
    ["agentloop.events.*.s42.>", "agentloop.events.bot.s42.ToolCallStarted", true],
    ["agentloop.events.*.s42.>", "agentloop.events.bot.s43.ToolCallStarted", false],
    ["a*.b", "a*.b", true],
    ["a*.b", "ax.b", false],
  ])("%s vs %s → %s", (pattern, subject, expected) => {
    expect(subjectMatches(pattern, subject)).toBe(expected);
  });

  it("matches a literal subject to itself and to > under any of its prefixes", () => {
    const token = fc.stringMatching(/^[A-Za-z0-9_-]{1,6}$/);
    fc.assert(
      fc.property(fc.array(token, { minLength: 1, maxLength: 6 }), fc.nat(), (tokens, cut) => {
        const subject = tokens.join(".");
        expect(subjectMatches(subject, subject)).toBe(true);
        const keep = cut % tokens.length;
        expect(subjectMatches([...tokens.slice(0, keep), ">"].join("."), subject)).toBe(true);
        expect(subjectMatches([...tokens, ">"].join("."), subject)).toBe(false);
        const starred = tokens.map((item, index) => (index === keep ? "*" : item)).join(".");
        expect(subjectMatches(starred, subject)).toBe(true);
      }),
    );
  });
});

describe("subject validity", () => {
  it.each([
    ["a", true],
    ["a.b.c", true],
    ["a*.b>", true],
    ["", false],
    ["a..b", false],
    [".a", false],
    ["a.", false],
    ["a.*", false],
    ["a.>", false],
    ["*", false],
    ["a b", false],
    ["a\tb", false],
    ["a\u00a0b", false],
    ["a\u0001b", false],
  ])("isValidSubject(%j) = %s", (subject, expected) => {
    expect(isValidSubject(subject)).toBe(expected);
  });

  it.each([
    ["a.b", true],
    ["a.*", true],
    ["a.>", true],
    [">", true],
    ["*.*", true],
    ["", false],
    ["a..b", false],
    ["a.>.b", false],
    ["> ", false],
    ["a b.>", false],
    ["a.", false],
  ])("isValidPattern(%j) = %s", (pattern, expected) => {
    expect(isValidPattern(pattern)).toBe(expected);
  });
});

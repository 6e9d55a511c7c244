import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { instanceOf, isProtocolToken, protocolSubject } from "../../src/protocol/protocol-subjects.js";
import { errorStatusOf, formatPayloadSize } from "../../src/protocol/stream-chunks.js";
import { VERSION } from "../../src/version.js";

describe("protocol subjects (§2)", () => {
  it("builds verb-first subjects and reads the instance token", () => {
    expect(protocolSubject("prompt", "bot", "acme", "default")).toBe("agents.prompt.bot.acme.default");
    expect(instanceOf("agents.prompt.bot.acme.s1")).toBe("s1");
    expect(instanceOf("agents.prompt.bot.acme")).toBeUndefined();
    expect(instanceOf("other.prompt.bot.acme.s1")).toBeUndefined();
  });

  it("checks tokens", () => {
    expect(isProtocolToken("my-agent_1")).toBe(true);
    for (const bad of ["", "a.b", "*", ">", "a b", "$sys", "a\0"]) expect(isProtocolToken(bad)).toBe(false);
  });
});

describe("protocol errors and metadata", () => {
  it("maps our error codes to §9 status codes", () => {
    expect(errorStatusOf("bad_request")).toBe(400);
    expect(errorStatusOf("forbidden")).toBe(403);
    expect(errorStatusOf("unknown_agent")).toBe(404);
    expect(errorStatusOf("queue_overflow")).toBe(429);
    expect(errorStatusOf("overloaded")).toBe(429);
    expect(errorStatusOf("budget_exceeded")).toBe(429);
    expect(errorStatusOf("cancelled")).toBe(409);
    expect(errorStatusOf("llm_error")).toBe(500);
    expect(errorStatusOf("internal")).toBe(500);
  });

  it("writes max_payload in base-1024 units", () => {
    expect(formatPayloadSize(1024 * 1024)).toBe("1MB");
    expect(formatPayloadSize(8 * 1024 * 1024)).toBe("8MB");
    expect(formatPayloadSize(1536)).toBe("1536B");
    expect(formatPayloadSize(64 * 1024)).toBe("64KB");
  });
});

describe("VERSION", () => {
  it("is package.json's version", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    expect(VERSION).toBe(pkg.version);
  });
});

import { describe, expect, it } from "vitest";
import { BusConfigError } from "../../src/bus/bus-errors.js";
import { parseNatsUrl, redactNatsUrl } from "../../src/bus/nats-url.js";

describe("parseNatsUrl", () => {
  it.each([
    ["nats://127.0.0.1:4222", { servers: ["127.0.0.1:4222"], tls: false }],
    ["nats://localhost", { servers: ["localhost:4222"], tls: false }],
    ["localhost:4333", { servers: ["localhost:4333"], tls: false }],
    ["nats://user:pa%40ss@host:1", { servers: ["host:1"], tls: false, user: "user", pass: "pa@ss" }],
    ["nats://s3cret-token@host", { servers: ["host:4222"], tls: false, token: "s3cret-token" }],
    ["tls://secure.example:4443", { servers: ["secure.example:4443"], tls: true }],
    ["TLS://secure.example", { servers: ["secure.example:4222"], tls: true }],
    ["nats://[::1]:4222", { servers: ["[::1]:4222"], tls: false }],
    ["nats://a:b@h1:1, nats://h2:2,", { servers: ["h1:1", "h2:2"], tls: false, user: "a", pass: "b" }],
  ])("%s", (url, expected) => {
    expect(parseNatsUrl(url)).toEqual(expected);
  });

  it.each([
    ["", /empty/],
    [" , ", /empty/],
    ["http://host:4222", /unsupported NATS URL scheme "http"/],
    ["ws://host", /unsupported/],
    ["nats://", /invalid NATS URL|no host/],
    ["nats://a:b@host:notaport", /invalid NATS URL/],
  ])("refuses %j", (url, reason) => {
    expect(() => parseNatsUrl(url)).toThrow(BusConfigError);
    expect(() => parseNatsUrl(url)).toThrow(reason);
  });

  it("never puts credentials in its errors", () => {
    expect(() => parseNatsUrl("http://user:hunter2@host")).toThrow(/\*\*\*@host/);
    expect(() => parseNatsUrl("http://user:hunter2@host")).not.toThrow(/hunter2/);
  });
});

describe("redactNatsUrl", () => {
  it.each([
    ["nats://user:pass@host:4222", "nats://***@host:4222"],
    ["nats://token@host", "nats://***@host"],
    ["nats://host:4222", "nats://host:4222"],
    ["nats://a:b@h1,nats://c@h2", "nats://***@h1,nats://***@h2"],
    ["user:pass@host", "***@host"],
  ])("%s → %s", (url, expected) => {
    expect(redactNatsUrl(url)).toBe(expected);
  });
});

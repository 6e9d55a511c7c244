import type { Endpoint } from "@nats-io/services";
import { describe, expect, it } from "vitest";
import { EndpointCounts } from "../../src/bus/counted-endpoint.js";

/** $SRV.STATS counts of asynchronous handlers, kept by us and shown through the public statsHandler. */

function clock() {
  let now = 1_000;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const endpointOn = (subject: string) => ({ subject }) as Endpoint;

describe("EndpointCounts", () => {
  it("counts each request once its handling settles: errors with their reason, time from arrival to reply", async () => {
    const time = clock();
    const counts = new EndpointCounts({ now: time.now });
    let finish!: (outcome: { isError: false }) => void;
    counts.track(
      "a.chat",
      new Promise((resolve) => {
        finish = resolve;
      }),
    );
    expect(counts.of("a.chat").num_requests).toBe(0);
    time.advance(5);
    finish({ isError: false });
    counts.track("a.chat", Promise.resolve({ isError: true, reason: "bad_request: not JSON" }));
    counts.track("a.chat", Promise.reject(new Error("handler broke")));
    counts.track("a.control", Promise.resolve({ isError: false }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(counts.of("a.chat")).toEqual({
      num_requests: 3,
      num_errors: 2,
      last_error: "handler broke",
      processing_time: 5_000_000,
      average_processing_time: Math.round(5_000_000 / 3),
    });
    expect(counts.of("a.control")).toMatchObject({ num_requests: 1, num_errors: 0 });
  });

  it("shows an endpoint's counts as data.replies, after the host-wide fields", async () => {
    const counts = new EndpointCounts();
    counts.track("a.chat", Promise.resolve({ isError: true, reason: "overloaded: busy" }));
    await new Promise((resolve) => setImmediate(resolve));
    const handler = counts.statsHandler(() => ({ eventPublishFailures: 2 }));
    expect(await handler(endpointOn("a.chat"))).toEqual({
      eventPublishFailures: 2,
      replies: expect.objectContaining({ num_requests: 1, num_errors: 1, last_error: "overloaded: busy" }),
    });
    expect(await counts.statsHandler()(endpointOn("a.never"))).toEqual({
      replies: { num_requests: 0, num_errors: 0, processing_time: 0, average_processing_time: 0 },
    });
  });
});

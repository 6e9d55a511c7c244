import { JetStreamApiError } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { CREATION_RACE_TRIES, retryTransient, whileStarting } from "../../src/bus/jetstream-retry.js";
import { UnavailableError } from "../../src/errors/unavailable-error.js";

const noPeers = () =>
  new JetStreamApiError({ code: 400, err_code: 10005, description: "no suitable peers for placement" });
const refused = () =>
  new JetStreamApiError({
    code: 400,
    err_code: 10074,
    description: "replicas > 1 not supported in non-clustered mode",
  });

/** An operation that fails with `failures` in turn, then answers "made". */
function failing(...failures: Array<() => Error>): { run: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    run: async () => {
      const failure = failures[calls++];
      if (failure !== undefined) throw failure();
      return "made";
    },
    calls: () => calls,
  };
}

const instant = { sleep: async () => {} };

/** What nats-server answers one of two hosts creating the same bucket at the same moment. */
const overlap = () =>
  new JetStreamApiError({
    code: 400,
    err_code: 10065,
    description: "subjects overlap with an existing stream",
  });

describe("creating streams and buckets while a host starts", () => {
  it("waits out a JetStream cluster whose servers have not all joined yet", async () => {
    const operation = failing(noPeers, noPeers);
    await expect(whileStarting("the history stream", operation.run, instant)).resolves.toBe("made");
    expect(operation.calls()).toBe(3);
  });

  it("gives up on a cluster that never places the replicas, as unavailable", async () => {
    let clock = 0;
    const never = async (): Promise<string> => {
      clock += 10_000;
      throw noPeers();
    };
    const attempt = whileStarting("the history stream", never, {
      ...instant,
      now: () => clock,
      deadlineMs: 30_000,
    });
    await expect(attempt).rejects.toBeInstanceOf(UnavailableError);
    await expect(attempt).rejects.toThrow(/the history stream/);
  });

  it("asks again when another host created the same stream at the same moment", async () => {
    const operation = failing(overlap, overlap);
    await expect(whileStarting("the journal bucket", operation.run, instant)).resolves.toBe("made");
    expect(operation.calls()).toBe(3);
  });

  it("gives a real subject overlap up after a few tries, with the server's words", async () => {
    const operation = failing(...Array.from({ length: 20 }, () => overlap));
    await expect(whileStarting("the journal bucket", operation.run, instant)).rejects.toThrow(
      /subjects overlap/,
    );
    expect(operation.calls()).toBe(CREATION_RACE_TRIES + 1);
  });

  it("passes any other refusal on at once", async () => {
    const operation = failing(refused);
    await expect(whileStarting("the history stream", operation.run, instant)).rejects.toThrow(
      /non-clustered/,
    );
    expect(operation.calls()).toBe(1);
  });

  it("retries no placement refusal once the host runs (reads and purges)", async () => {
    const operation = failing(noPeers);
    await expect(retryTransient("journal read", operation.run, instant)).rejects.toThrow(/no suitable peers/);
    expect(operation.calls()).toBe(1);
  });
});

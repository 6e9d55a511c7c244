import { afterEach, describe, expect, it } from "vitest";
import type { BusMessage } from "../../src/bus/bus.js";
import { NoRespondersError } from "../../src/bus/bus-errors.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { HostSilentError, requestWithHeartbeat } from "../../src/bus/request-with-heartbeat.js";
import { parseSessionHeartbeat, type SessionHeartbeat } from "../../src/bus/session-heartbeat.js";

/**
 * A client waiting on a host that died waited out a 30-minute timeout. A
 * request made with requestWithHeartbeat watches the session's heartbeat and gives up within
 * seconds of the beats stopping.
 */

const CHAT = "agentloop.agents.bot.chat";
const BEATS = "agentloop.sessions.bot.s1.heartbeat";

const buses: LocalBus[] = [];
afterEach(async () => {
  await Promise.all(buses.splice(0).map((bus) => bus.close()));
});

function createBus(): LocalBus {
  const bus = new LocalBus();
  buses.push(bus);
  return bus;
}

function beat(intervalMs = 10): string {
  const heartbeat: SessionHeartbeat = {
    host: "h1",
    agent: "bot",
    session: "s1",
    ts: new Date().toISOString(),
    intervalMs,
    requests: 1,
  };
  return JSON.stringify(heartbeat);
}

const reply = JSON.stringify({ ok: true, session: "s1", result: "done", usage: {} });

describe("requestWithHeartbeat", () => {
  it("does not blame the host for silence while its own connection is down, and gives it a window once back", async () => {
    // A nats-server restart silences every host's beats while the client is away too; the
    // held beats and the reply arrive after the reconnect, so the client must not give up meanwhile.
    const bus = createBus();
    let connectivity = { isConnected: false, reconnectedAt: 0 };
    const away = Object.assign(bus, { connectivity: () => connectivity });
    let answer: BusMessage | undefined;
    bus.subscribe(CHAT, (message) => {
      answer = message;
    });
    const replied = requestWithHeartbeat(away, CHAT, "{}", {
      heartbeatSubject: BEATS,
      heartbeatTimeoutMs: 20,
      timeoutMs: 60_000,
    });
    // Several silent windows pass while disconnected: still waiting.
    await new Promise((resolve) => setTimeout(resolve, 120));
    connectivity = { isConnected: true, reconnectedAt: Date.now() };
    bus.publish(BEATS, beat(5));
    bus.respond(answer!, reply);
    expect(JSON.parse((await replied).data)).toMatchObject({ ok: true, result: "done" });
  });

  it("still gives up on a host that stays silent after its own connection came back", async () => {
    const bus = createBus();
    const reconnectedAt = Date.now();
    const back = Object.assign(bus, { connectivity: () => ({ isConnected: true, reconnectedAt }) });
    bus.subscribe(CHAT, () => {});
    const error = await requestWithHeartbeat(back, CHAT, "{}", {
      heartbeatSubject: BEATS,
      heartbeatTimeoutMs: 30,
      timeoutMs: 60_000,
    }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(HostSilentError);
  });

  it("gives up on a host that beat, then fell silent without replying", async () => {
    const bus = createBus();
    bus.subscribe(CHAT, () => {
      // A host that took the request, beat twice and died.
      bus.publish(BEATS, beat());
      bus.publish(BEATS, beat());
    });
    const error = await requestWithHeartbeat(bus, CHAT, "{}", {
      heartbeatSubject: BEATS,
      heartbeatTimeoutMs: 50,
      timeoutMs: 60_000,
    }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(HostSilentError);
    expect(error).toMatchObject({ subject: CHAT, heartbeatSubject: BEATS });
    expect((error as HostSilentError).message).toMatch(
      /^no heartbeat from the host serving agentloop\.agents\.bot\.chat for \d+ ms \(on agentloop\.sessions\.bot\.s1\.heartbeat\)/,
    );
  });

  it("gives up on a host that died before its first beat", async () => {
    const bus = createBus();
    bus.subscribe(CHAT, () => {});
    await expect(
      requestWithHeartbeat(bus, CHAT, "{}", { heartbeatSubject: BEATS, heartbeatTimeoutMs: 50 }),
    ).rejects.toBeInstanceOf(HostSilentError);
  });

  it("keeps waiting while the host beats, past many silence limits, and returns its reply", async () => {
    const bus = createBus();
    let beats = 0;
    bus.subscribe(CHAT, (message: BusMessage) => {
      const timer = setInterval(() => {
        beats += 1;
        bus.publish(BEATS, beat(50));
        if (beats === 40) {
          clearInterval(timer);
          bus.respond(message, reply);
        }
      }, 50);
    });
    // 2 s of beats against a 600 ms limit: a loaded machine may hold a timer back a few hundred ms.
    const answer = await requestWithHeartbeat(bus, CHAT, "{}", {
      heartbeatSubject: BEATS,
      heartbeatTimeoutMs: 600,
    });
    expect(answer.data).toBe(reply);
    expect(beats).toBe(40);
  });

  it("ignores what is not a heartbeat on the subject", async () => {
    const bus = createBus();
    bus.subscribe(CHAT, () => {
      for (let index = 0; index < 5; index++) bus.publish(BEATS, "not a heartbeat");
    });
    await expect(
      requestWithHeartbeat(bus, CHAT, "{}", { heartbeatSubject: BEATS, heartbeatTimeoutMs: 50 }),
    ).rejects.toBeInstanceOf(HostSilentError);
    expect(parseSessionHeartbeat(beat())).toMatchObject({ host: "h1", requests: 1 });
    expect(parseSessionHeartbeat("{}")).toBeUndefined();
  });

  it("still reports nobody listening at once, and the caller's abort with its reason", async () => {
    const bus = createBus();
    await expect(requestWithHeartbeat(bus, CHAT, "{}", { heartbeatSubject: BEATS })).rejects.toBeInstanceOf(
      NoRespondersError,
    );
    bus.subscribe(CHAT, () => bus.publish(BEATS, beat()));
    const controller = new AbortController();
    const waiting = requestWithHeartbeat(bus, CHAT, "{}", {
      heartbeatSubject: BEATS,
      signal: controller.signal,
    });
    controller.abort(new Error("the user pressed Ctrl-C"));
    await expect(waiting).rejects.toThrow("the user pressed Ctrl-C");
  });
});

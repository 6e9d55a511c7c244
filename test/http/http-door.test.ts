import { afterEach, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { HttpDoor, HttpDoorContext } from "../../src/http/http-door.js";
import { sendJson } from "../../src/http/http-io.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";

let server: UiServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A door that answers with the prefix it was given, and records that it was closed. */
function probeDoor(): HttpDoor & { seen: HttpDoorContext[]; closed: number } {
  const door = {
    name: "probe",
    pathPrefix: "/probe/",
    seen: [] as HttpDoorContext[],
    closed: 0,
    routes(context: HttpDoorContext) {
      door.seen.push(context);
      return [
        {
          method: "GET" as const,
          path: "/probe/prefix",
          handle: ({ response }: { response: import("node:http").ServerResponse }) =>
            sendJson(response, 200, { prefix: context.prefix }),
        },
      ];
    },
    async close() {
      door.closed += 1;
    },
  };
  return door;
}

describe("protocol doors on the UI's HTTP server", () => {
  it("routes a door's paths with the server's bus and prefix, and closes the door with the server", async () => {
    const door = probeDoor();
    server = await startUiServer({ bus: new LocalBus(), prefix: "doorsx", doors: [door] });
    const base = new URL(server.url).origin;
    const response = await fetch(`${base}/probe/prefix`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ prefix: "doorsx" });
    expect(door.seen).toHaveLength(1);
    await server.close();
    server = undefined;
    expect(door.closed).toBe(1);
  });

  it("puts every door path behind the token, as the UI's API is", async () => {
    const token = "door-token-0123456789abcdef";
    server = await startUiServer({ bus: new LocalBus(), doors: [probeDoor()], token });
    const base = new URL(server.url).origin;
    expect((await fetch(`${base}/probe/prefix`)).status).toBe(401);
    const allowed = await fetch(`${base}/probe/prefix`, { headers: { authorization: `Bearer ${token}` } });
    expect(allowed.status).toBe(200);
    // A foreign Origin is refused before the door sees the request.
    const foreign = await fetch(`${base}/probe/prefix`, {
      headers: { authorization: `Bearer ${token}`, origin: "http://evil.example" },
    });
    expect(foreign.status).toBe(403);
  });
});

describe("a server that cannot listen", () => {
  it("leaves no bus subscription and no open door behind when its port is taken", async () => {
    server = await startUiServer({ bus: new LocalBus() });
    const port = Number(new URL(server.url).port);
    const bus = new LocalBus();
    let open = 0;
    const subscribe = bus.subscribe.bind(bus);
    bus.subscribe = (...args: Parameters<LocalBus["subscribe"]>) => {
      const subscription = subscribe(...args);
      open += 1;
      let ended = false;
      return {
        ...subscription,
        unsubscribe: () => {
          if (!ended) open -= 1;
          ended = true;
          subscription.unsubscribe();
        },
      };
    };
    const door = probeDoor();
    await expect(startUiServer({ bus, port, doors: [door] })).rejects.toThrow(/EADDRINUSE/);
    expect(open).toBe(0);
    expect(door.closed).toBe(1);
    await bus.close();
  });
});

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BusConfigError } from "../../src/bus/bus-errors.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { type NatsServer, startNatsServer, workerNatsServer } from "../support/nats-server.js";
import { registerBusContractTests } from "./bus-contract.js";
import { record, uniqueRoot } from "./bus-helpers.js";

let server: NatsServer;
beforeAll(async () => {
  server = await workerNatsServer();
});
afterAll(async () => {
  await server.stop();
});

registerBusContractTests("NatsBus", ({ onHandlerError }) =>
  NatsBus.connect({ url: server.url, name: "bus-contract", onHandlerError }),
);

/** A port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const address = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return typeof address === "object" && address !== null ? address.port : 0;
}

describe("NatsBus", () => {
  it("says it is nats and exposes its connection", async () => {
    const bus = await NatsBus.connect({ url: server.url });
    expect(bus.kind).toBe("nats");
    expect(bus.connection.isClosed()).toBe(false);
    await bus.close();
    expect(bus.connection.isClosed()).toBe(true);
  });

  it("talks to other connections: a request from one bus is answered by another", async () => {
    const host = await NatsBus.connect({ url: server.url, name: "host" });
    const client = await NatsBus.connect({ url: server.url, name: "client" });
    const subject = `${uniqueRoot()}.agents.bot.chat`;
    host.subscribe(subject, (message) => host.respond(message, `got ${message.data}`), { queue: "hosts" });
    await host.flush();
    const reply = await client.request(subject, "hi", { timeoutMs: 5_000 });
    expect(reply.data).toBe("got hi");
    await Promise.all([host.close(), client.close()]);
  });

  it("counts publishes it cannot send instead of throwing", async () => {
    const bus = await NatsBus.connect({ url: server.url });
    const root = uniqueRoot();
    const inbox = record(bus, `${root}.>`);
    const maxPayload = bus.connection.info?.max_payload ?? 1024 * 1024;
    expect(() => bus.publish(`${root}.big`, "x".repeat(maxPayload + 1))).not.toThrow();
    expect(() => bus.publish(`${root}.*`, "wildcard")).not.toThrow();
    bus.publish(`${root}.small`, "ok");
    await inbox.waitFor(1);
    expect(inbox.messages.map((message) => message.subject)).toEqual([`${root}.small`]);
    expect(bus.droppedPublishes).toBe(2);
    await bus.close();
    bus.publish(`${root}.late`, "x");
    expect(bus.droppedPublishes).toBe(3);
  });

  it("publishes UTF-8 bytes as they are, counting those it cannot send like publish does", async () => {
    const bus = await NatsBus.connect({ url: server.url });
    const root = uniqueRoot();
    const inbox = record(bus, `${root}.>`);
    await bus.flush();
    const maxPayload = bus.connection.info?.max_payload ?? 1024 * 1024;
    const slab = Buffer.from('ignored{"text":"é ✓ 🎉"}ignored', "utf8");
    const bytes = new Uint8Array(slab.buffer, slab.byteOffset + 7, slab.length - 14);
    expect(() => bus.publishBytes(`${root}.big`, new Uint8Array(maxPayload + 1))).not.toThrow();
    expect(() => bus.publishBytes(`${root}.*`, bytes)).not.toThrow();
    bus.publishBytes(`${root}.bytes`, bytes);
    bus.publish(`${root}.text`, "after");
    await inbox.waitFor(2);
    expect(inbox.messages.map(({ subject, data }) => [subject, data])).toEqual([
      [`${root}.bytes`, '{"text":"é ✓ 🎉"}'],
      [`${root}.text`, "after"],
    ]);
    expect(bus.droppedPublishes).toBe(2);
    await bus.close();
    bus.publishBytes(`${root}.late`, bytes);
    expect(bus.droppedPublishes).toBe(3);
  });

  it("tryConnect returns undefined when nothing listens at the URL", async () => {
    const port = await closedPort();
    await expect(NatsBus.tryConnect(`nats://127.0.0.1:${port}`, 1_000)).resolves.toBeUndefined();
  });

  it("tryConnect connects when the server is there", async () => {
    const bus = await NatsBus.tryConnect(server.url, 2_000);
    expect(bus?.kind).toBe("nats");
    await bus?.close();
  });

  it("refuses an unreadable credentials file as a configuration error, even in tryConnect", async () => {
    const options = { url: server.url, credsFile: "/nonexistent/agentloop.creds" };
    await expect(NatsBus.connect(options)).rejects.toThrow(BusConfigError);
    await expect(NatsBus.connect(options)).rejects.toThrow(/\/nonexistent\/agentloop\.creds/);
    await expect(NatsBus.tryConnect(server.url, 1_000, { credsFile: options.credsFile })).rejects.toThrow(
      BusConfigError,
    );
  });

  it("refuses a malformed credentials file as a configuration error, so tryConnect does not fall back to the in-process bus", async () => {
    const directory = await mkdtemp(join(tmpdir(), "agentloop-creds-"));
    const credsFile = join(directory, "garbage.creds");
    await writeFile(credsFile, "this is not a NATS credentials file\n");
    try {
      await expect(NatsBus.connect({ url: server.url, credsFile })).rejects.toThrow(
        /credentials file .*garbage\.creds is not usable: unable to parse credentials/,
      );
      await expect(NatsBus.tryConnect(server.url, 1_000, { credsFile })).rejects.toThrow(BusConfigError);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });

  it("refuses a URL with an unsupported scheme as a configuration error", async () => {
    await expect(NatsBus.connect({ url: "http://127.0.0.1:4222" })).rejects.toThrow(BusConfigError);
  });
});

describe("NatsBus credentials in the URL", () => {
  let userServer: NatsServer;
  let tokenServer: NatsServer;
  let configDir: string;
  beforeAll(async () => {
    configDir = await mkdtemp(join(tmpdir(), "agentloop-nats-conf-"));
    const configFile = join(configDir, "users.conf");
    await writeFile(
      configFile,
      [
        "authorization {",
        "  users = [",
        '    { user: "agent", password: "s3cr#t" }',
        '    { user: "limited", password: "pw", permissions: { subscribe: { deny: ["secret.>"] } } }',
        "  ]",
        "}",
      ].join("\n"),
    );
    [userServer, tokenServer] = await Promise.all([
      startNatsServer({ isPrivate: true, args: ["-c", configFile] }),
      startNatsServer({ isPrivate: true, args: ["--auth", "tok3n"] }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([userServer.stop(), tokenServer.stop()]);
    await rm(configDir, { recursive: true, force: true });
  });

  const hostPort = (url: string): string => url.replace("nats://", "");

  it("logs in with user:password from the URL (percent-encoded)", async () => {
    const bus = await NatsBus.connect({ url: `nats://agent:s3cr%23t@${hostPort(userServer.url)}` });
    const subject = `${uniqueRoot()}.ping`;
    bus.subscribe(subject, (message) => bus.respond(message, "pong"));
    expect((await bus.request(subject, "ping", { timeoutMs: 5_000 })).data).toBe("pong");
    await bus.close();
  });

  it("logs in with a token from the URL", async () => {
    const bus = await NatsBus.connect({ url: `nats://tok3n@${hostPort(tokenServer.url)}` });
    expect(bus.connection.isClosed()).toBe(false);
    await bus.close();
  });

  it("reports refused credentials as a configuration error, without the password", async () => {
    const url = `nats://agent:wrong-password@${hostPort(userServer.url)}`;
    const failure = await NatsBus.connect({ url }).catch((error) => error);
    expect(failure).toBeInstanceOf(BusConfigError);
    expect(String(failure.message)).toMatch(/refused the credentials/);
    expect(String(failure.message)).not.toContain("wrong-password");
    await expect(NatsBus.tryConnect(url, 2_000)).rejects.toThrow(BusConfigError);
  });

  it("reports a subscription the server's permissions refuse", async () => {
    const refusals: string[] = [];
    const bus = await NatsBus.connect({
      url: `nats://limited:pw@${hostPort(userServer.url)}`,
      onSubscriptionError: (error, subject) => refusals.push(`${subject}: ${(error as Error).message}`),
    });
    bus.subscribe("secret.plans", () => {});
    await bus.flush();
    const deadline = Date.now() + 5_000;
    while (refusals.length === 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(refusals).toEqual([expect.stringMatching(/^secret\.plans: .*[Pp]ermissions? [Vv]iolation/)]);
    await bus.close();
  });
});

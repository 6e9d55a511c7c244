import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf } from "../support/cli.js";
import { type NatsServer, startNatsServer } from "../support/nats-server.js";

/**
 * A host whose NATS user may not subscribe to `$SRV.>` nor `agents.>` (an operator who never
 * granted the micro-service or Agent Protocol subjects) still serves our own contract: the
 * services are extras, never a reason to stop answering chats; what will not work is said once
 * per feature at start.
 */

let server: NatsServer;
let configDir: string;
let bus: NatsBus;

beforeAll(async () => {
  configDir = await mkdtemp(join(tmpdir(), "agentloop-protocol-perm-"));
  const configFile = join(configDir, "users.conf");
  await writeFile(
    configFile,
    [
      "authorization {",
      "  users = [",
      '    { user: "client", password: "pw" }',
      '    { user: "host", password: "pw", permissions: { subscribe: { deny: ["$SRV.>", "agents.>"] } } }',
      "  ]",
      "}",
    ].join("\n"),
  );
  server = await startNatsServer({ isPrivate: true, args: ["-c", configFile] });
  bus = await NatsBus.connect({ url: server.url.replace("nats://", "nats://client:pw@") });
});

afterAll(async () => {
  await bus?.close();
  await server?.stop();
  await rm(configDir, { recursive: true, force: true });
});

describe("serve without permission for $SRV and agents.>", () => {
  it("keeps answering chats on its own contract", async () => {
    const prefix = uniqueRoot();
    const serve = startServe([
      "--nats",
      server.url.replace("nats://", "nats://host:pw@"),
      "--prefix",
      prefix,
    ]);
    await waitUntilServing(bus, prefix, serve);
    for (let round = 0; round < 3; round++) {
      const reply = await bus.request(
        chatSubject(prefix, "assistant"),
        JSON.stringify({ session: "s", text: "hi" }),
        {
          timeoutMs: 15_000,
        },
      );
      expect(JSON.parse(reply.data)).toMatchObject({ ok: true });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const run = await serve.stop();
    expect(run.code).toBe(0);
    // Said once per feature at start, never per subject, and not again at run time.
    expect(linesOf(run.stderr)).toEqual([
      expect.stringMatching(
        /^agentloop serve: \$SRV discovery and stats will not work: the NATS server refused it \(may not subscribe to "\$SRV\.PING" and \d+ more under \$SRV\.; grant subscribe "\$SRV\.>"\); the host serves its own contract without it$/,
      ),
      expect.stringMatching(
        /^agentloop serve: the Agent Protocol will not work: the NATS server refused it \(may not subscribe to "agents\.prompt\.assistant\.agentloop\.default" in queue group "agents" and 3 more under agents\.; grant /,
      ),
      "agentloop serve: stopping: finishing running chats (signal again to cancel them)",
    ]);
  });
});

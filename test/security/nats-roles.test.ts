import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConnectionInbox } from "../../src/bus/connection-inbox.js";
import { parseChatReply } from "../../src/bus/contract.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { PROBE_HEADER } from "../../src/bus/probe-message.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli } from "../support/cli.js";
import { type NatsServer, startNatsServer } from "../support/nats-server.js";

/**
 * The least-privilege roles of docs/security-nats-roles.md, run against the very config file the
 * document ships (examples/roles/nats.conf, with the port and store directory given on the
 * command line): a host, clients with their own inboxes, an observer and an approver each do
 * their job and nothing more, and a host missing a permission names it at start.
 */

const ROLES_CONF = fileURLToPath(new URL("../../examples/roles/nats.conf", import.meta.url));
const PREFIX = "agentloop";

let server: NatsServer;
let host: RunningServe;
const buses: NatsBus[] = [];

function urlFor(target: NatsServer, user: string): string {
  return target.url.replace("nats://", `nats://${user}:${user}-pw@`);
}

async function connectAs(user: string, inboxPrefix?: string, log?: (line: string) => void): Promise<NatsBus> {
  const bus = await NatsBus.connect({
    url: urlFor(server, user),
    ...(inboxPrefix === undefined ? {} : { inboxPrefix }),
    ...(log === undefined ? {} : { log }),
    onSubscriptionError: () => {},
  });
  buses.push(bus);
  return bus;
}

beforeAll(async () => {
  server = await startNatsServer({ isPrivate: true, args: ["-c", ROLES_CONF] });
  host = startServe([
    "--nats",
    urlFor(server, "host"),
    "--inbox-prefix",
    "_INBOX_host",
    "--history",
    "nats",
    "--host-id",
    "roles-host",
  ]);
  await waitUntilServing(await connectAs("alice", "_INBOX_alice"), PREFIX, host);
}, 60_000);

afterAll(async () => {
  for (const bus of buses) await bus.close();
  const run = await host?.stop();
  await server?.stop();
  // The host ran the whole suite without a single refusal.
  expect(run === undefined ? [] : linesOf(run.stderr)).toEqual([
    "agentloop serve: stopping: finishing running chats (signal again to cancel them)",
  ]);
}, 60_000);

describe("the host role (serve --history nats)", () => {
  it("starts without a refusal and answers a client", async () => {
    const run = await runCli([
      "chat",
      "--nats",
      urlFor(server, "alice"),
      "--inbox-prefix",
      "_INBOX_alice",
      "--session",
      "alice",
      "--events",
      "none",
      "hello from alice",
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('You said: "hello from alice"');
  }, 60_000);
});

describe("the client role", () => {
  it("cannot take replies on the shared _INBOX: the server refuses the subscription", async () => {
    const logged: string[] = [];
    const bob = await connectAs("bob", undefined, (line) => logged.push(line));
    await expect(
      bob.request(chatSubject(PREFIX, "assistant"), JSON.stringify({ session: "bob", text: "hi" }), {
        timeoutMs: 10_000,
      }),
    ).rejects.toThrow(/^the NATS server refused the request: this user may not subscribe to "_INBOX\./);
    await bob.flush();
    expect(bob.permissionErrors).toBe(1);
    expect(logged).toEqual([
      expect.stringMatching(/^the NATS server refused: may not subscribe to "_INBOX\.[A-Za-z0-9]+\.\*" /),
    ]);
  });

  it("never sees another client's replies, even subscribing to their inbox", async () => {
    const seen: string[] = [];
    const bob = await connectAs("bob", "_INBOX_bob");
    const refused: string[] = [];
    bob.watchPermissionErrors((denial) => refused.push(`${denial.operation} ${denial.subject}`));
    bob.subscribe("_INBOX_alice.>", (message) => seen.push(message.data));
    bob.subscribe("_INBOX.>", (message) => seen.push(message.data));
    await bob.flush();
    const alice = await connectAs("alice", "_INBOX_alice");
    const reply = await alice.request(
      chatSubject(PREFIX, "assistant"),
      JSON.stringify({ session: "alice", text: "private" }),
      { timeoutMs: 30_000 },
    );
    const parsed = parseChatReply(reply.data);
    expect(parsed.ok && parsed.value.ok).toBe(true);
    await bob.flush();
    expect(refused.sort()).toEqual(["subscription _INBOX.>", "subscription _INBOX_alice.>"]);
    expect(seen).toEqual([]);
  }, 60_000);

  it("may not publish control requests: each refusal is counted, the subject logged once", async () => {
    const logged: string[] = [];
    const alice = await connectAs("alice", "_INBOX_alice", (line) => logged.push(line));
    for (let attempt = 0; attempt < 2; attempt++) {
      await expect(
        alice.request(
          controlSubject(PREFIX, "assistant"),
          JSON.stringify({ session: "alice", command: "stop" }),
          { timeoutMs: 10_000 },
        ),
      ).rejects.toThrow(
        'the NATS server refused the request: this user may not publish to "agentloop.agents.assistant.control"',
      );
    }
    await alice.flush();
    expect(alice.permissionErrors).toBe(2);
    expect(logged).toEqual([
      'the NATS server refused: may not publish to "agentloop.agents.assistant.control" (permission errors so far: 1; the same subject is not logged again for 10 min)',
    ]);
  });
});

describe("chat under the client role", () => {
  it("names the subject the user may not use, in one line, exit 2", async () => {
    const run = await runCli([
      "chat",
      "--nats",
      urlFor(server, "alice"),
      "--inbox-prefix",
      "_INBOX_alice",
      "--agent",
      "researcher",
      "--session",
      "alice",
      "hi",
    ]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(linesOf(run.stderr)).toEqual([
      'agentloop: cannot watch agentloop.events.researcher.alice.> (Permissions Violation for Subscription to "agentloop.events.researcher.alice.>"); the chat goes on without it',
      'agentloop: cannot watch agentloop.sessions.researcher.alice.heartbeat (Permissions Violation for Subscription to "agentloop.sessions.researcher.alice.heartbeat"); the chat goes on without it',
      'agentloop: the NATS server refused the request: this user may not publish to "agentloop.agents.researcher.chat"',
    ]);
  });
});

describe("the approver role", () => {
  it("sends control requests and gets their replies on its own inbox", async () => {
    const ops = await connectAs("ops", "_INBOX_ops");
    const reply = await ops.request(
      controlSubject(PREFIX, "assistant"),
      JSON.stringify({ session: "alice", command: "stop" }),
      { timeoutMs: 30_000 },
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true });
  }, 60_000);
});

describe("the Agent Protocol caller role", () => {
  it("prompts a session and reads the whole stream on its own inbox", async () => {
    const caller = await connectAs("caller", "_INBOX_caller");
    const refused: string[] = [];
    caller.watchPermissionErrors((denial) => refused.push(`${denial.operation} ${denial.subject}`));
    const connection = caller.connection;
    const inbox = createConnectionInbox(connection);
    expect(inbox.startsWith("_INBOX_caller.")).toBe(true);
    const stream = connection.subscribe(inbox, { timeout: 30_000 });
    connection.publish("agents.prompt.assistant.agentloop.caller", "hello over the protocol", {
      reply: inbox,
    });
    const chunks: Array<{ type: string; data: unknown }> = [];
    for await (const message of stream) {
      if (message.data.length === 0) break;
      chunks.push(message.json());
    }
    expect(chunks[0]).toEqual({ type: "status", data: "ack" });
    const answer = chunks
      .filter((chunk) => chunk.type === "response")
      .map((chunk) => chunk.data)
      .join("");
    expect(answer).toContain('You said: "hello over the protocol"');
    await caller.flush();
    expect(refused).toEqual([]);
  }, 60_000);
});

describe("the monitor role", () => {
  it("lists the live sessions and the Agent Protocol agents", async () => {
    const alice = await connectAs("alice", "_INBOX_alice");
    await alice.request(
      chatSubject(PREFIX, "assistant"),
      JSON.stringify({ session: "alice", text: "lease it" }),
      { timeoutMs: 30_000 },
    );
    const identity = ["--nats", urlFor(server, "monitor"), "--inbox-prefix", "_INBOX_monitor"];
    const sessions = await runCli(["sessions", ...identity, "--json"]);
    expect(sessions.stderr).toBe("");
    expect(sessions.code).toBe(0);
    expect(sessions.stdout).toContain('"session":"alice"');
    const agents = await runCli(["agents", ...identity, "--json", "--timeout", "2s"]);
    expect(agents.stderr).toBe("");
    expect(agents.code).toBe(0);
    expect(agents.stdout).toContain('"agent":"assistant"');
  }, 60_000);
});

describe("the observer role", () => {
  it("tails the events live and replays them from the event log", async () => {
    const alice = await connectAs("alice", "_INBOX_alice");
    await alice.request(
      chatSubject(PREFIX, "assistant"),
      JSON.stringify({ session: "alice", text: "for the log" }),
      { timeoutMs: 30_000 },
    );
    const directory = await mkdtemp(join(tmpdir(), "agentloop-roles-tail-"));
    try {
      const jsonl = join(directory, "events.jsonl");
      const controller = new AbortController();
      const tail = runCli(
        [
          "tail",
          "--nats",
          urlFor(server, "watcher"),
          "--inbox-prefix",
          "_INBOX_watcher",
          "--since",
          "1h",
          "--jsonl",
          jsonl,
        ],
        { signal: controller.signal },
      );
      // Replayed from JetStream: the chat above is in the log.
      const deadline = Date.now() + 20_000;
      let text = "";
      while (!text.includes("for the log") && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        text = await readFile(jsonl, "utf8").catch(() => "");
      }
      expect(text).toContain('"text":"for the log"');
      // A host's start-up probe on the events is skipped without a warning.
      const probing = await connectAs("host", "_INBOX_host");
      probing.publish("agentloop.events.assistant.$probe.PermissionProbe", "", {
        [PROBE_HEADER]: "permissions",
      });
      await probing.flush();
      // Live: a chat now arrives too.
      await alice.request(
        chatSubject(PREFIX, "assistant"),
        JSON.stringify({ session: "alice", text: "seen live" }),
        { timeoutMs: 30_000 },
      );
      while (!text.includes("seen live") && Date.now() < deadline + 20_000) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        text = await readFile(jsonl, "utf8").catch(() => "");
      }
      controller.abort();
      const run = await tail;
      expect(text).toContain('"text":"seen live"');
      expect(run.code).toBe(0);
      expect(run.stderr).toBe("");
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  }, 90_000);
});

/**
 * The example's host role with one allow entry taken out, as further users of a second server:
 * `host_no_<name>` lacks the `publish` entry `subject`.
 */
async function withReducedHosts(
  reductions: Record<string, string>,
  run: (target: NatsServer) => Promise<void>,
): Promise<void> {
  const example = await readFile(ROLES_CONF, "utf8");
  const hostBlock = /\n {2}HOST = \{\n[\s\S]*?\n {2}\}\n/.exec(example)?.[0];
  if (hostBlock === undefined) throw new Error("examples/roles/nats.conf has no HOST block");
  let roles = "";
  let users = "";
  for (const [name, subject] of Object.entries(reductions)) {
    const entry = `"${subject}",`;
    if (!hostBlock.includes(entry)) throw new Error(`the HOST block has no ${entry}`);
    roles += hostBlock.replace("HOST = {", `HOST_NO_${name.toUpperCase()} = {`).replace(entry, "");
    users += `    { user: host_no_${name}, password: host_no_${name}-pw, permissions: $HOST_NO_${name.toUpperCase()} }\n`;
  }
  const reduced = example
    .replace("\n  users = [\n", `${roles}\n  users = [\n${users}`)
    .replace(/^# .*$/gm, "");
  const directory = await mkdtemp(join(tmpdir(), "agentloop-roles-reduced-"));
  const file = join(directory, "nats.conf");
  await writeFile(file, reduced);
  const target = await startNatsServer({ isPrivate: true, args: ["-c", file] });
  try {
    await run(target);
  } finally {
    await target.stop();
    await rm(directory, { recursive: true, force: true });
  }
}

describe("--inbox-prefix", () => {
  it.each([
    "_INBOX.>",
    "a.*",
    "a..b",
    "has space",
    "$SYS",
  ])("refuses %j with a usage error", async (prefix) => {
    const run = await runCli(["sessions", "--nats", "nats://127.0.0.1:1", "--inbox-prefix", prefix]);
    expect(run.code).toBe(2);
    expect(linesOf(run.stderr)).toEqual([
      `agentloop: --inbox-prefix must be NATS subject tokens (letters, digits, _ and -, separated by dots; no wildcards), got "${prefix}"`,
    ]);
  });
});

describe("a host missing a permission", () => {
  it("names the subject at start and exits 2, at once", async () => {
    await withReducedHosts({ sessions: "agentloop.sessions.>", js: "$JS.API.>" }, async (target) => {
      const serve = (user: string, ...extra: string[]) =>
        runCli(["serve", "--nats", urlFor(target, user), "--inbox-prefix", "_INBOX_host", ...extra]);

      const noHeartbeats = await serve("host_no_sessions");
      expect(noHeartbeats.code).toBe(2);
      expect(noHeartbeats.stdout).toBe("");
      expect(linesOf(noHeartbeats.stderr)).toEqual([
        'agentloop: the NATS user lacks permissions this host needs: may not publish to "agentloop.sessions.assistant.$probe.heartbeat" (grant publish "agentloop.sessions.>") (the host role is in docs/security-nats-roles.md)',
      ]);

      // JetStream's refusal is an answer: named, not retried.
      const noJetStream = await serve("host_no_js", "--history", "nats");
      expect(noJetStream.code).toBe(2);
      expect(linesOf(noJetStream.stderr)).toEqual([
        'agentloop: the NATS user lacks permissions this host needs: may not publish to "$JS.API.INFO" (grant publish "$JS.API.>") (the host role is in docs/security-nats-roles.md)',
      ]);
    });
  }, 90_000);
});

describe("permission errors at run time", () => {
  it("are counted in $SRV.STATS and logged once per subject", async () => {
    await withReducedHosts({ hb: "agents.hb.>" }, async (target) => {
      const serve = startServe([
        "--nats",
        urlFor(target, "host_no_hb"),
        "--inbox-prefix",
        "_INBOX_host",
        "--heartbeat",
        "200ms",
      ]);
      const monitor = await NatsBus.connect({
        url: urlFor(target, "monitor"),
        inboxPrefix: "_INBOX_monitor",
      });
      try {
        const alice = await NatsBus.connect({ url: urlFor(target, "alice"), inboxPrefix: "_INBOX_alice" });
        try {
          await waitUntilServing(alice, PREFIX, serve);
        } finally {
          await alice.close();
        }
        let permissionErrors = 0;
        for (let attempt = 0; attempt < 100 && permissionErrors < 3; attempt++) {
          const reply = await monitor.request("$SRV.STATS.agentloop", "", { timeoutMs: 5_000 });
          const stats = JSON.parse(reply.data) as { endpoints: Array<{ name: string; data?: unknown }> };
          const chat = stats.endpoints.find((endpoint) => endpoint.name === "chat");
          permissionErrors = (chat?.data as { permissionErrors?: number } | undefined)?.permissionErrors ?? 0;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(permissionErrors).toBeGreaterThanOrEqual(3);
      } finally {
        await monitor.close();
      }
      const run = await serve.stop();
      expect(run.code).toBe(0);
      expect(linesOf(run.stderr)).toEqual([
        'agentloop serve: the Agent Protocol will not work: the NATS server refused it (may not publish to "agents.hb.assistant.agentloop.default"; grant subscribe "agents.prompt.*.<owner>.*" and "agents.status.*.<owner>.*", publish "agents.hb.>"); the host serves its own contract without it',
        'agentloop serve: the NATS server refused: may not publish to "agents.hb.assistant.agentloop.default" (permission errors so far: 1; the same subject is not logged again for 10 min)',
        "agentloop serve: stopping: finishing running chats (signal again to cancel them)",
      ]);
    });
  }, 90_000);
});

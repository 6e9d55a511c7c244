import { createInbox } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { controlSubject } from "../../src/bus/subjects.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { textOf } from "../../src/llm/types.js";
import { StreamChunk } from "../../src/protocol/stream-chunks.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { workerNatsServer } from "../support/nats-server.js";

/**
 * An approval a child needs, bubbled up to the root of its agent tree, is asked in the Agent
 * Protocol `query` of the root's prompt (naming the child that holds the call), and the caller's
 * answer there decides the child's call: the same one-time, argument-bound path as `approve` on the
 * root's control subject.
 */

const prefix = uniqueRoot();
const OWNER = "agentloop";

function lastUser(request: ScriptedRequest): string {
  const user = request.messages.filter((message) => message.role === "user").at(-1);
  return user === undefined ? "" : textOf(user.content);
}

/** The root: asks `qchild` what it is told, then answers with what it got. */
function rootModel(request: ScriptedRequest): ScriptedStep {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { text: `child said: ${textOf(last.content)}` };
  return { toolCalls: [{ name: "ask_agent", arguments: { agent: "qchild", message: lastUser(request) } }] };
}

/** The child: opens a vault (needs approval), then says what happened. */
function childModel(request: ScriptedRequest): ScriptedStep {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { text: `vault: ${textOf(last.content)}` };
  return { toolCalls: [{ name: "open_vault", arguments: { door: 7 } }] };
}

const openVault = defineTool({
  name: "open_vault",
  description: "Opens a vault door.",
  parameters: z.object({ door: z.number() }),
  needsApproval: true,
  execute: ({ door }) => `door ${door} open`,
});

let bus: NatsBus;
let host: RunningHost;

beforeAll(async () => {
  const { url } = await workerNatsServer();
  bus = await NatsBus.connect({ url, name: "tree protocol query" });
  host = await startHost({
    bus,
    prefix,
    graceMs: 0,
    agents: [
      {
        name: "qroot",
        tools: ["ask_agent"],
        backend: new ScriptedBackend(rootModel),
        approval: { selfApprove: true },
      },
      { name: "qchild", tools: [openVault], backend: new ScriptedBackend(childModel) },
    ],
  });
});

afterAll(async () => {
  await host?.close();
  await bus?.close();
});

type Query = Extract<StreamChunk, { type: "query" }>["data"];

/** Prompts the root's default session over the Agent Protocol; `onQuery` answers each query. */
async function prompt(text: string, onQuery: (query: Query) => Promise<void>) {
  const nc = bus.connection;
  const inbox = createInbox();
  const subscription = nc.subscribe(inbox, { timeout: 60_000 });
  nc.publish(`agents.prompt.qroot.${OWNER}.default`, text, { reply: inbox });
  let answer = "";
  const queries: Query[] = [];
  for await (const message of subscription) {
    if (message.data.length === 0 && message.headers === undefined) break;
    if (message.headers !== undefined) continue;
    const chunk = StreamChunk.parse(message.json());
    if (chunk.type === "response") answer += chunk.data;
    if (chunk.type === "query") {
      queries.push(chunk.data);
      await onQuery(chunk.data);
    }
  }
  return { answer, queries };
}

describe("a child's approval in the root's Agent Protocol query", () => {
  it("is asked naming the child, and the caller's answer decides the child's call once", async () => {
    const outcomes: unknown[] = [];
    const { answer, queries } = await prompt("open it", async (query) => {
      const reply = await bus.connection.request(query.reply_subject, "yes", { timeout: 20_000 });
      outcomes.push(reply.json());
    });
    expect(queries).toHaveLength(1);
    expect(queries[0]?.prompt).toBe(
      'Approve open_vault({"door":7}) (asked by qchild/qroot-default)? Answer yes or no (optionally: no, <reason>).',
    );
    expect(outcomes).toEqual([{ ok: true }]);
    expect(answer).toBe("child said: vault: door 7 open");
    // Decided once: the same decision on the root's control subject is refused where it was held.
    const again = await bus.request(
      controlSubject(prefix, "qroot"),
      JSON.stringify({ session: "default", command: "approve", toolCallId: queries[0]?.id }),
    );
    expect(JSON.parse(again.data)).toMatchObject({ ok: false });
  });

  it("a denial given in the query reaches the child's model as its reason", async () => {
    const { answer } = await prompt("open it again", async (query) => {
      const reply = await bus.connection.request(query.reply_subject, "no, not today", { timeout: 20_000 });
      expect(reply.json()).toEqual({ ok: true });
    });
    expect(answer).toContain("child said: vault: ");
    expect(answer).toContain("not today");
  });
});

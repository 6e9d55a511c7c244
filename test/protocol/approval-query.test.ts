import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { createInbox } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { controlSubject } from "../../src/bus/subjects.js";
import {
  approvalQuestion,
  readApprovalAnswer,
  SELF_APPROVAL_REFUSED,
} from "../../src/protocol/approval-queries.js";
import { StreamChunk } from "../../src/protocol/stream-chunks.js";
import { turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { type FakeProvider, startFakeProvider, textTurn, toolResults } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * A tool call that needs approval, in a chat started by an Agent Protocol prompt, is asked
 * mid-stream as a `query` chunk; the caller's answer on its `reply_subject` decides it when the
 * agent allows self-approval (`approval.selfApprove`). Without it (the default) the prompt's
 * sender cannot approve what its own prompt caused: its answer is refused and an approver decides
 * on the control subject (`agentloop serve` on a real nats-server, a scripted model calling
 * `current_time`).
 */

let server: NatsServer;
let bus: NatsBus;
let nc: NatsConnection;
let model: FakeProvider;
let directory: string;
let serve: RunningServe;
const prefix = uniqueRoot();
const owner = `o${uniqueRoot()}`;
const timeCall = turn({ toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }] });
const QUESTION = "Approve current_time({})? Answer yes or no (optionally: no, <reason>).";

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "protocol-approval-query" });
  nc = bus.connection;
  model = await startFakeProvider("openai-chat", [
    timeCall,
    textTurn("It is noon."),
    timeCall,
    textTurn("I was not allowed to look."),
    timeCall,
    textTurn("Approved elsewhere."),
    timeCall,
    textTurn("Approved by an approver."),
  ]);
  directory = await mkdtemp(join(tmpdir(), "agentloop-protocol-approval-"));
  const agents = join(directory, "agents.json");
  await writeFile(
    agents,
    JSON.stringify({
      agents: [
        {
          name: "assistant",
          tools: ["current_time"],
          needsApproval: ["current_time"],
          approval: { selfApprove: true },
        },
        { name: "guarded", tools: ["current_time"], needsApproval: ["current_time"] },
      ],
    }),
  );
  serve = startServe(
    ["--nats", server.url, "--prefix", prefix, "--agents", agents, "--owner", owner, ...model.flags],
    model.env,
  );
  await waitUntilServing(bus, prefix, serve);
});

afterAll(async () => {
  const run = await serve?.stop();
  expect(run?.code).toBe(0);
  // The guarded chat's two refused answers: one log line naming the rule, no stack trace.
  expect(run?.stderr.split("\n").filter((line) => line.includes("(rule: self-approval)"))).toEqual([
    `agentloop serve: refused an answer to the approval query of current_time call call_1 in guarded/default (rule: self-approval): ${SELF_APPROVAL_REFUSED}`,
  ]);
  expect(run?.stderr).not.toMatch(/^\s+at /m);
  await bus?.close();
  await model?.close();
  await server?.stop();
  await rm(directory, { recursive: true, force: true });
});

type Query = Extract<StreamChunk, { type: "query" }>["data"];

/**
 * Prompts the default session and reads the stream to its terminator; `onQuery` answers (or not)
 * each `query` chunk as it comes.
 */
async function prompt(
  text: string,
  onQuery: (query: Query) => Promise<void> | void,
  agent = "assistant",
): Promise<{ chunks: StreamChunk[]; queries: Query[]; errorCode: string | undefined }> {
  const inbox = createInbox();
  const subscription = nc.subscribe(inbox, { timeout: 60_000 });
  nc.publish(`agents.prompt.${agent}.${owner}.default`, text, { reply: inbox });
  const chunks: StreamChunk[] = [];
  const queries: Query[] = [];
  let errorCode: string | undefined;
  for await (const message of subscription) {
    if (message.data.length === 0 && message.headers === undefined) break;
    if (message.headers !== undefined) {
      errorCode = message.headers.get("Nats-Service-Error-Code");
      continue;
    }
    const chunk = StreamChunk.parse(message.json());
    chunks.push(chunk);
    if (chunk.type === "query") {
      queries.push(chunk.data);
      await onQuery(chunk.data);
    }
  }
  subscription.unsubscribe();
  return { chunks, queries, errorCode };
}

function responseText(chunks: readonly StreamChunk[]): string {
  return chunks
    .filter((chunk) => chunk.type === "response")
    .map((chunk) => (typeof chunk.data === "string" ? chunk.data : chunk.data.text))
    .join("");
}

/** The inbox of an answered (or otherwise finished) question is gone: nobody answers there. */
async function expectClosed(replySubject: string): Promise<void> {
  await expect(nc.request(replySubject, "yes", { timeout: 5_000 })).rejects.toThrow(/no responders/i);
}

describe("tool approval as the Agent Protocol's mid-stream query", () => {
  it("reads answers: yes / y / approve approve; anything else denies, a leading no is not the reason", () => {
    for (const answer of ["yes", " Y ", "APPROVE", "Yes\n"]) {
      expect(readApprovalAnswer(answer)).toEqual({ approved: true });
    }
    expect(readApprovalAnswer("no")).toEqual({ approved: false });
    expect(readApprovalAnswer("No, not now")).toEqual({ approved: false, reason: "not now" });
    expect(readApprovalAnswer("deny: too risky")).toEqual({ approved: false, reason: "too risky" });
    expect(readApprovalAnswer("nothing doing")).toEqual({ approved: false, reason: "nothing doing" });
    expect(readApprovalAnswer("yes please")).toEqual({ approved: false, reason: "yes please" });
    expect(approvalQuestion({ toolName: "current_time", toolCallId: "c", arguments: "{}" })).toBe(QUESTION);
  });

  it(
    "asks with a query chunk; answering yes runs the tool and the answer follows",
    { timeout: 60_000 },
    async () => {
      const answers: unknown[] = [];
      const streamed = await prompt("what time is it?", async (query) => {
        // Answered as a request: the host tells the outcome.
        const reply = await nc.request(query.reply_subject, "yes", { timeout: 30_000 });
        answers.push(reply.json());
      });
      expect(streamed.chunks[0]).toEqual({ type: "status", data: "ack" });
      expect(streamed.queries).toEqual([
        { id: "call_1", reply_subject: expect.stringMatching(/^_INBOX\./), prompt: QUESTION },
      ]);
      expect(answers).toEqual([{ ok: true }]);
      expect(streamed.errorCode).toBeUndefined();
      expect(responseText(streamed.chunks)).toBe("It is noon.");
      const [toolResult] = toolResults("openai-chat", model.bodies()[1]!);
      expect(toolResult?.callId).toBe("call_1");
      expect(toolResult?.output).not.toContain("denied");
      await expectClosed(streamed.queries[0]!.reply_subject);
    },
  );

  it(
    "answering `no, not now` (an envelope) denies: the model sees the reason",
    { timeout: 60_000 },
    async () => {
      const streamed = await prompt("and now?", (query) => {
        nc.publish(query.reply_subject, JSON.stringify({ prompt: "no, not now" }));
      });
      expect(streamed.queries).toHaveLength(1);
      expect(responseText(streamed.chunks)).toBe("I was not allowed to look.");
      expect(toolResults("openai-chat", model.bodies()[3]!).at(-1)).toEqual({
        callId: "call_1",
        output: JSON.stringify({ error: "denied", reason: "not now" }),
      });
      await expectClosed(streamed.queries[0]!.reply_subject);
    },
  );

  it(
    "a question left unanswered stays pending: the control subject decides it and closes the inbox",
    {
      timeout: 60_000,
    },
    async () => {
      const streamed = await prompt("once more?", async (query) => {
        // A bad envelope is no answer: told so, the question stays open.
        const bad = await nc.request(query.reply_subject, JSON.stringify({ prompt: 5 }), { timeout: 30_000 });
        expect(bad.json()).toMatchObject({ ok: false, error: { code: "bad_request" } });
        const reply = await bus.request(
          controlSubject(prefix, "assistant"),
          JSON.stringify({ session: "default", command: "approve", toolCallId: query.id }),
          { timeoutMs: 30_000 },
        );
        expect(JSON.parse(reply.data)).toEqual({ ok: true });
      });
      expect(streamed.queries).toHaveLength(1);
      expect(responseText(streamed.chunks)).toBe("Approved elsewhere.");
      await expectClosed(streamed.queries[0]!.reply_subject);
    },
  );

  it(
    "without self-approval the prompt's sender's answer is forbidden: an approver decides",
    { timeout: 60_000 },
    async () => {
      const refusals: unknown[] = [];
      const streamed = await prompt(
        "what time is it, guarded?",
        async (query) => {
          for (const answer of ["yes", JSON.stringify({ prompt: "approve" })]) {
            const reply = await nc.request(query.reply_subject, answer, { timeout: 30_000 });
            refusals.push(reply.json());
          }
          // The sender's answers decided nothing: the call still waits, and the approver's does.
          const reply = await bus.request(
            controlSubject(prefix, "guarded"),
            JSON.stringify({ session: "default", command: "approve", toolCallId: query.id }),
            { timeoutMs: 30_000 },
          );
          expect(JSON.parse(reply.data)).toEqual({ ok: true });
        },
        "guarded",
      );
      expect(streamed.queries).toEqual([
        {
          id: "call_1",
          reply_subject: expect.stringMatching(/^_INBOX\./),
          prompt: approvalQuestion(
            { toolName: "current_time", toolCallId: "call_1", arguments: "{}" },
            false,
          ),
        },
      ]);
      expect(refusals).toEqual([
        { ok: false, error: { code: "forbidden", message: SELF_APPROVAL_REFUSED } },
        { ok: false, error: { code: "forbidden", message: SELF_APPROVAL_REFUSED } },
      ]);
      expect(responseText(streamed.chunks)).toBe("Approved by an approver.");
      await expectClosed(streamed.queries[0]!.reply_subject);
    },
  );
});

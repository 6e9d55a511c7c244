import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chatSubject, LocalBus, startHost } from "agentloop";
import { ScriptedBackend } from "agentloop/testing";
import { afterEach, describe, expect, it } from "vitest";
import config from "../agentloop.config.js";
import { refundsIssued } from "../tools.js";

/**
 * The support desk's agents, exactly as agentloop.config.js defines them (tools, prompts, the MCP
 * file server), on an in-process bus with scripted models in place of a real provider.
 */

const DESK = join(dirname(fileURLToPath(import.meta.url)), "..");
const running = [];
afterEach(async () => {
  for (const close of running.splice(0).reverse()) await close();
  refundsIssued.length = 0;
});

/** Starts the desk with each agent's model replaced by a script, and returns a way to chat with it. */
async function startDesk(models) {
  const bus = new LocalBus();
  const events = [];
  const agents = config.agents.map((agent) => ({ ...agent, backend: models[agent.name] ?? agent.backend }));
  const host = await startHost({ bus, agents, onEvent: (event) => events.push(event) });
  running.push(
    () => bus.close(),
    () => host.close(),
  );
  const chat = async (agent, session, text) =>
    JSON.parse(
      (
        await bus.request(chatSubject("agentloop", agent), JSON.stringify({ session, text }), {
          timeoutMs: 20_000,
        })
      ).data,
    );
  const control = async (agent, request) =>
    JSON.parse((await bus.request(`agentloop.agents.${agent}.control`, JSON.stringify(request))).data);
  return { bus, events, chat, control };
}

/** A model that makes the given tool calls first, then answers with what the tools returned. */
function callsThenSummarises(calls) {
  return new ScriptedBackend((request) => {
    const results = request.messages.filter((message) => message.role === "tool");
    if (results.length === 0) return { toolCalls: calls };
    return { text: results.map((message) => String(message.content)).join(" | ") };
  });
}

describe("the support desk", () => {
  it("triage looks an order up with the desk's own tool", async () => {
    const triage = callsThenSummarises([{ name: "lookup_order", arguments: { orderId: "A-1002" } }]);
    const desk = await startDesk({ triage });
    const reply = await desk.chat("triage", "c1", "where is my milk frother? order A-1002");
    expect(reply.ok).toBe(true);
    expect(JSON.parse(reply.result)).toMatchObject({ item: "milk frother", status: "in transit" });
    expect(triage.requests[0].options.tools.map((tool) => tool.name).sort()).toEqual(
      ["ask_agent", "current_time", "lookup_order"].sort(),
    );
  });

  it("a bad order id is a tool error the model sees, not a crash", async () => {
    const triage = callsThenSummarises([{ name: "lookup_order", arguments: { orderId: "1002" } }]);
    const desk = await startDesk({ triage });
    const reply = await desk.chat("triage", "c2", "order 1002?");
    expect(reply.ok).toBe(true);
    expect(JSON.parse(reply.result).error).toMatch(/^invalid arguments for tool "lookup_order": orderId/);
  });

  it("refunds reads the policy through the desk's MCP server, which serves its policies only", async () => {
    const refunds = callsThenSummarises([
      { name: "policies__read_policy", arguments: { topic: "refunds" } },
      { name: "policies__read_policy", arguments: { topic: "../../etc/passwd" } },
    ]);
    const desk = await startDesk({ refunds });
    const reply = await desk.chat("refunds", "r1", "what is the refund policy?");
    expect(reply.ok).toBe(true);
    const [policy, outside] = reply.result.split(" | ");
    expect(policy).toContain("Refunds over 200 EUR need a team lead's approval.");
    expect(JSON.parse(outside).error).toBe(`no policy "../../etc/passwd" (topics: refunds)`);
  });

  it("a refund waits for a person: approve pays it once, deny tells the model why", async () => {
    const refunds = callsThenSummarises([
      {
        id: "refund-1",
        name: "issue_refund",
        arguments: { orderId: "A-1001", amount: 249, reason: "arrived broken" },
      },
    ]);
    const desk = await startDesk({ refunds });
    const requested = () => desk.events.filter((event) => event.kind === "ToolApprovalRequested");

    const paid = desk.chat("refunds", "r2", "my espresso machine arrived broken, order A-1001");
    await expect.poll(() => requested().length).toBe(1);
    expect(requested()[0]).toMatchObject({ toolName: "issue_refund", toolCallId: "refund-1" });
    expect(refundsIssued).toEqual([]); // nothing is paid before the decision
    expect(
      await desk.control("refunds", { session: "r2", command: "approve", toolCallId: "refund-1" }),
    ).toEqual({ ok: true });
    expect(JSON.parse((await paid).result)).toEqual({ refunded: 249, orderId: "A-1001" });
    expect(refundsIssued).toEqual([{ orderId: "A-1001", amount: 249, reason: "arrived broken" }]);
    // Used once: approving the same call again is refused.
    expect(
      await desk.control("refunds", { session: "r2", command: "approve", toolCallId: "refund-1" }),
    ).toMatchObject({ ok: false });

    const denied = desk.chat("refunds", "r3", "refund A-1001 again please");
    await expect.poll(() => requested().length).toBe(2);
    await desk.control("refunds", {
      session: "r3",
      command: "deny",
      toolCallId: "refund-1",
      reason: "already refunded",
    });
    expect(JSON.parse((await denied).result)).toMatchObject({ error: "denied", reason: "already refunded" });
    expect(refundsIssued).toHaveLength(1);
  });
});

/**
 * The desk as a newcomer without an API key runs it: agentloop.config.js gives each agent its
 * scripted part (keyless-model.js; vitest.config.js clears the provider keys), nothing replaced.
 */
describe("the support desk without an API key", () => {
  const QUESTION = "My espresso machine (order A-1001) arrived broken. Can I have a refund?";

  it("looks the order up, asks the policies server, holds the refund for a person, then answers", async () => {
    const desk = await startDesk({});
    const held = () =>
      desk.events.filter((event) => event.kind === "ToolApprovalRequested" && event.session === "k1");
    const completed = (toolName) =>
      desk.events.find((event) => event.kind === "ToolCallCompleted" && event.toolName === toolName);

    const answer = desk.chat("triage", "k1", QUESTION);
    // The refund, asked by the refunds agent, is announced on the customer's own session.
    await expect.poll(() => held().length, { timeout: 20_000 }).toBe(1);
    const [request] = held();
    expect(request).toMatchObject({ toolName: "issue_refund", heldBy: { agent: "refunds" } });
    expect(JSON.parse(request.arguments)).toEqual({
      orderId: "A-1001",
      amount: 249,
      reason: "arrived damaged",
    });
    expect(JSON.parse(completed("lookup_order").result)).toMatchObject({
      item: "espresso machine",
      amount: 249,
    });
    expect(completed("policies__read_policy").result).toContain(
      "Damaged items are refunded without returning them.",
    );
    expect(refundsIssued).toEqual([]); // held: nothing is paid before a person decides

    expect(
      await desk.control("triage", { session: "k1", command: "approve", toolCallId: request.toolCallId }),
    ).toEqual({ ok: true });
    const reply = await answer;
    expect(reply.ok).toBe(true);
    expect(reply.result).toBe(
      "Order A-1001: espresso machine, delivered on 2026-11-20, 249 EUR. The refunds desk says: " +
        'Refunded 249 EUR for order A-1001, as the refund policy says: "Damaged items are refunded without returning them."',
    );
    expect(refundsIssued).toEqual([{ orderId: "A-1001", amount: 249, reason: "arrived damaged" }]);
  });

  it("runs from the terminal: `agentloop chat --local --config` asks for the approval on stdin", async () => {
    const approved = await chatInTerminal(QUESTION, "y\n");
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr).toContain(
      'approve issue_refund({"orderId":"A-1001","amount":249,"reason":"arrived damaged"})? [y/N]',
    );
    expect(approved.stdout).toContain("Refunded 249 EUR for order A-1001");
  });
});

/** Runs the installed CLI on the desk's config, `input` piped to its stdin, no provider key set. */
function chatInTerminal(text, input) {
  const bin = fileURLToPath(import.meta.resolve("agentloop/package.json")).replace(
    /package\.json$/,
    "dist/src/cli/bin.js",
  );
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [bin, "chat", "--local", "--config", "agentloop.config.js", text],
      {
        cwd: DESK,
        env: { ...process.env, ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", NO_COLOR: "1" },
        timeout: 60_000,
      },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") reject(error);
        else resolve({ code: error ? error.code : 0, stdout, stderr });
      },
    );
    child.stdin.end(input);
  });
}

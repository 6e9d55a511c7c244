// The desk without an API key: a scripted model (from agentloop/testing) that plays each agent's
// part from the conversation itself, so every feature of the example runs offline and the same way
// every time. Each reply is chosen from the customer's last message and the tool results that
// followed it; a real model takes over as soon as ANTHROPIC_API_KEY or OPENAI_API_KEY is set.
import { scriptedModel } from "agentloop/testing";

const ORDER_ID = /\bA-\d{4}\b/;
const WANTS_REFUND = /refund|broken|damaged|money back/i;
const NOTE = "(This desk runs on a scripted model: set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one.)";

/** True when no provider key is set: the config then gives each agent its scripted part. */
export function isKeyless(env = process.env) {
  return !env.ANTHROPIC_API_KEY && !env.OPENAI_API_KEY;
}

/** The scripted model for one of the desk's agents (`triage` or `refunds`). */
export function keylessModel(agent) {
  const play = PARTS[agent];
  if (play === undefined)
    throw new Error(`no scripted part for agent "${agent}" (have: ${Object.keys(PARTS).join(", ")})`);
  return scriptedModel((request) => play(currentTurn(request.messages)));
}

const PARTS = {
  /** Looks the order up, hands a refund to the refunds agent, then answers with what both said. */
  triage({ question, results }) {
    const orderId = question.match(ORDER_ID)?.[0];
    if (orderId === undefined)
      return { text: `Which order is it about? Give me its id, e.g. A-1001. ${NOTE}` };
    if (results.length === 0) return { toolCalls: [{ name: "lookup_order", arguments: { orderId } }] };
    const order = describeOrder(orderId, results[0]);
    if (results.length === 1 && WANTS_REFUND.test(question) && !isError(results[0])) {
      const message = `Refund request for order ${orderId} (${order}). The customer wrote: "${question}"`;
      return { toolCalls: [{ name: "ask_agent", arguments: { agent: "refunds", message } }] };
    }
    const refunds = results[1] === undefined ? "" : ` The refunds desk says: ${results[1]}`;
    return { text: `${order}.${refunds}` };
  },

  /** Reads the policy (MCP) and the order, asks to pay the refund (held for approval), then reports. */
  refunds({ question, results }) {
    const orderId = question.match(ORDER_ID)?.[0];
    if (orderId === undefined) return { text: `Which order should I refund? ${NOTE}` };
    if (results.length === 0) {
      return {
        toolCalls: [
          { name: "policies__read_policy", arguments: { topic: "refunds" } },
          { name: "lookup_order", arguments: { orderId } },
        ],
      };
    }
    const [policy = "", found] = results;
    const rule =
      policy
        .split("\n")
        .find((line) => /damaged/i.test(line))
        ?.replace(/^-\s*/, "") ?? policy.trim();
    if (results.length === 2) {
      const order = parseJson(found);
      if (typeof order?.amount !== "number") return { text: `I cannot refund ${orderId}: ${found}` };
      const reason = /broken|damaged/i.test(question) ? "arrived damaged" : "the customer asked for a refund";
      return { toolCalls: [{ name: "issue_refund", arguments: { orderId, amount: order.amount, reason } }] };
    }
    const outcome = parseJson(results[2]);
    if (typeof outcome?.refunded === "number") {
      return {
        text: `Refunded ${outcome.refunded} EUR for order ${orderId}, as the refund policy says: "${rule}"`,
      };
    }
    const why = outcome?.reason ?? outcome?.error ?? results[2];
    return { text: `The refund of order ${orderId} was not made: ${why}.` };
  },
};

/** The customer's last message and the tool results since, as text. */
function currentTurn(messages) {
  let last = messages.length - 1;
  while (last >= 0 && messages[last].role !== "user") last -= 1;
  const after = messages.slice(last + 1);
  return {
    question: last >= 0 ? textOf(messages[last].content) : "",
    results: after.filter((message) => message.role === "tool").map((message) => textOf(message.content)),
  };
}

function textOf(content) {
  if (typeof content === "string") return content;
  return content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isError(result) {
  return parseJson(result)?.error !== undefined;
}

function describeOrder(orderId, result) {
  const order = parseJson(result);
  if (order === undefined || order.error !== undefined) return `Order ${orderId}: ${order?.error ?? result}`;
  const delivered = order.deliveredOn === undefined ? "" : ` on ${order.deliveredOn}`;
  return `Order ${orderId}: ${order.item}, ${order.status}${delivered}, ${order.amount} EUR`;
}

import { defineTool, z } from "agentloop";

/** The shop's orders; a real desk would call its order service here. */
export const ORDERS = {
  "A-1001": { item: "espresso machine", status: "delivered", deliveredOn: "2026-11-20", amount: 249 },
  "A-1002": { item: "milk frother", status: "in transit", amount: 39 },
};

/** Refunds issued, newest last (a real desk would call its payment service). */
export const refundsIssued = [];

export const lookupOrder = defineTool({
  name: "lookup_order",
  description: "Looks up an order by its id (e.g. A-1001): item, status, delivery date, amount in EUR.",
  parameters: z.object({ orderId: z.string().regex(/^A-\d{4}$/) }),
  execute: ({ orderId }) => ORDERS[orderId] ?? { error: `no order ${orderId}` },
});

export const issueRefund = defineTool({
  name: "issue_refund",
  description: "Refunds an order (in full or in part). A person approves every refund before it is paid.",
  parameters: z.object({
    orderId: z.string().regex(/^A-\d{4}$/),
    amount: z.number().positive(),
    reason: z.string(),
  }),
  // Money leaves the shop: a human approves each call, bound to these exact arguments.
  needsApproval: true,
  execute: ({ orderId, amount, reason }) => {
    const order = ORDERS[orderId];
    if (order === undefined) return { error: `no order ${orderId}` };
    if (amount > order.amount) return { error: `the order was ${order.amount} EUR; cannot refund ${amount}` };
    refundsIssued.push({ orderId, amount, reason });
    return { refunded: amount, orderId };
  },
});

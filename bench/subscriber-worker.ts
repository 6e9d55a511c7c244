/**
 * The consumer of the event-publishing bench, in a process of its own as a logger or UI would be:
 * subscribes to `agentloop.events.>` on the nats-server given in argv, decodes every message,
 * counts them and (when asked) stamps the arrival of each text delta. Driven over IPC by
 * `RemoteSubscriber`.
 */
import { connect } from "@nats-io/transport-node";
import { nowUs } from "./support/clock.js";
import type { SubscriberCommand, SubscriberReply } from "./support/remote-subscriber.js";

const reply = (message: SubscriberReply) => process.send?.(message);

const connection = await connect({ servers: process.argv[2] ?? "", name: "bench-subscriber" });
let count = 0;
let deltaCount = 0;
let isStamping = false;
let stamps: number[] = [];
let waiter: { kind: "all" | "deltas"; target: number } | undefined;

const check = () => {
  if (!waiter) return;
  const reached = waiter.kind === "all" ? count : deltaCount;
  if (reached >= waiter.target) {
    waiter = undefined;
    reply({ type: "reached", count, deltaCount });
  }
};

connection.subscribe("agentloop.events.>", {
  callback: (error, message) => {
    if (error) return;
    message.string();
    count++;
    if (message.subject.endsWith(".ModelTextDelta")) {
      deltaCount++;
      if (isStamping) stamps.push(nowUs());
    }
    check();
  },
});
await connection.flush();

process.on("message", (command: SubscriberCommand) => {
  if (command.type === "await") {
    waiter = { kind: command.kind, target: command.target };
    check();
  } else if (command.type === "stamping") {
    isStamping = command.isOn;
  } else if (command.type === "take-stamps") {
    reply({ type: "stamps", stamps });
    stamps = [];
  } else if (command.type === "close") {
    void connection.drain().then(() => process.disconnect?.());
  }
});
reply({ type: "ready", count, deltaCount });

import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import { workerNatsServer } from "../support/nats-server.js";

/**
 * One trace across an agent tree: `top` on one host asks `bottom` on another through `ask_agent`;
 * the tool call's `traceparent` travels in the request's headers, so bottom's `invoke_agent` span
 * is a child of top's `execute_tool ask_agent` span and both hosts' spans share one trace id.
 */

const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  trace.disable();
});

function topModel(request: ScriptedRequest): ScriptedStep {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { text: `bottom said: ${textOf(last.content)}` };
  return { toolCalls: [{ name: "ask_agent", arguments: { agent: "bottom", message: "hello" } }] };
}

describe("an agent tree's spans", () => {
  it("form one trace across both hosts, the child's invoke_agent under the parent's execute_tool", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    // Registered before the hosts build their sessions: that is when an agent looks for a tracer.
    trace.setGlobalTracerProvider(provider);
    const { url } = await workerNatsServer();
    const hosts: RunningHost[] = [];
    const buses: NatsBus[] = [];
    const agents = [
      { name: "top", tools: ["ask_agent"], backend: new ScriptedBackend(topModel) },
      { name: "bottom", tools: [], backend: new ScriptedBackend([{ text: "hi back" }]) },
    ];
    for (const agent of agents) {
      const name = `${agent.name}-host`;
      const bus = await NatsBus.connect({ url, name });
      buses.push(bus);
      hosts.push(await startHost({ bus, prefix: "trtree", graceMs: 0, hostId: name, agents: [agent] }));
    }
    closers.push(async () => {
      for (const host of hosts) await host.close();
      for (const bus of buses) await bus.close();
    });
    const reply = await buses[0]!.request(
      chatSubject("trtree", "top"),
      JSON.stringify({ session: "s1", text: "go" }),
      { timeoutMs: 30_000 },
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true, result: "bottom said: hi back" });
    await provider.forceFlush();
    const spans = exporter.getFinishedSpans();
    const named = (name: string): ReadableSpan => {
      const span = spans.find((each) => each.name === name);
      if (span === undefined)
        throw new Error(`no span ${name} in ${spans.map((each) => each.name).join(", ")}`);
      return span;
    };
    const topChat = named("invoke_agent top");
    const askCall = named("execute_tool ask_agent");
    const bottomChat = named("invoke_agent bottom");
    expect(new Set(spans.map((span) => span.spanContext().traceId))).toEqual(
      new Set([topChat.spanContext().traceId]),
    );
    expect(bottomChat.parentSpanContext?.spanId).toBe(askCall.spanContext().spanId);
    expect(topChat.parentSpanContext).toBeUndefined();
  });
});

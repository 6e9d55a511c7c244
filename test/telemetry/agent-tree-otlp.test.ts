import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { type FakeHttpServer, startFakeHttpServer, turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { killServeProcesses, startServeProcess, waitUntilServing } from "../host/running-serve.js";
import { type FakeProvider, startFakeProvider } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { untilShardsBalanced } from "../support/preferred-session.js";

/**
 * One trace across two hosts, black-box: two `agentloop serve` processes (the built binary) export
 * their spans over OTLP/HTTP to one collector (a local HTTP server recording what is POSTed).
 * `top` on one host asks `bottom` on the other through `ask_agent`; the `traceparent` travels in
 * the NATS request's headers, so the collector holds one trace: bottom's `invoke_agent` span,
 * exported by the second host, is a child of top's `execute_tool ask_agent`, exported by the first.
 */

interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
}
interface OtlpRequest {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: { spans: OtlpSpan[] }[];
  }[];
}

let server: NatsServer;
let bus: NatsBus;
let collector: FakeHttpServer;
let directory: string;
const providers: FakeProvider[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "agent-tree-otlp-test" });
  collector = await startFakeHttpServer(() => ({ type: "json", body: {} }));
  directory = await mkdtemp(join(tmpdir(), "agentloop-tree-otlp-"));
});

afterAll(async () => {
  killServeProcesses();
  await Promise.all(providers.splice(0).map((provider) => provider.close()));
  await collector.close();
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

/** Every exported span with the `service.name` of the process that exported it. */
function exportedSpans(): (OtlpSpan & { service: string })[] {
  return collector.requests
    .filter((request) => request.method === "POST" && request.path === "/v1/traces")
    .flatMap((request) => (request.body as OtlpRequest).resourceSpans)
    .flatMap((entry) => {
      const service =
        entry.resource.attributes.find((attribute) => attribute.key === "service.name")?.value.stringValue ??
        "";
      return entry.scopeSpans.flatMap((scope) => scope.spans.map((span) => ({ ...span, service })));
    });
}

describe("an agent tree across two serve processes", () => {
  it(
    "reaches the OTLP collector as one trace: bottom's invoke_agent under top's execute_tool ask_agent",
    { timeout: 180_000 },
    async () => {
      const prefix = uniqueRoot();
      const topFile = join(directory, "top.json");
      const bottomFile = join(directory, "bottom.json");
      await writeFile(topFile, JSON.stringify({ agents: [{ name: "top", tools: ["ask_agent"] }] }));
      await writeFile(bottomFile, JSON.stringify({ agents: [{ name: "bottom" }] }));
      const topModel = await startFakeProvider("openai-chat", [
        turn({
          toolCalls: [
            {
              id: "call_1",
              name: "ask_agent",
              arguments: JSON.stringify({ agent: "bottom", message: "hi" }),
            },
          ],
        }),
        turn({ text: "bottom says hello" }),
      ]);
      const bottomModel = await startFakeProvider("openai-chat", [turn({ text: "hello" })]);
      providers.push(topModel, bottomModel);
      const host = (hostId: string, agentsFile: string, model: FakeProvider, service: string) =>
        startServeProcess(
          [
            ...["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, "--host-id", hostId],
            ...model.flags,
          ],
          { ...model.env, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: service },
        );
      const top = host("h-top", topFile, topModel, "top-host");
      const bottom = host("h-bottom", bottomFile, bottomModel, "bottom-host");
      await waitUntilServing(bus, prefix, top);
      await waitUntilServing(bus, prefix, bottom);
      await untilShardsBalanced(bus, prefix, ["h-top"]);
      await untilShardsBalanced(bus, prefix, ["h-bottom"]);

      const reply = await bus.request(
        chatSubject(prefix, "top"),
        JSON.stringify({ session: "s1", text: "ask bottom" }),
        { timeoutMs: 60_000 },
      );
      expect(JSON.parse(reply.data)).toMatchObject({ ok: true, result: "bottom says hello" });
      // Spans are flushed to the collector when each host stops.
      for (const stopped of [top, bottom]) {
        stopped.child.kill("SIGTERM");
        expect((await stopped.run).code).toBe(0);
      }

      const spans = exportedSpans();
      const askSpan = spans.find((span) => span.name === "execute_tool ask_agent");
      const topAgent = spans.find((span) => span.name === "invoke_agent top");
      const bottomAgent = spans.find((span) => span.name === "invoke_agent bottom");
      expect(askSpan?.service).toBe("top-host");
      expect(topAgent?.service).toBe("top-host");
      expect(bottomAgent?.service).toBe("bottom-host");
      expect(bottomAgent?.parentSpanId).toBe(askSpan?.spanId);
      // Every span of both hosts belongs to the root chat's one trace.
      expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([topAgent?.traceId]));
      expect(new Set(spans.map((span) => span.service))).toEqual(new Set(["top-host", "bottom-host"]));
    },
  );
});

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { registeredTracer } from "../../src/telemetry/agent-tracing.js";
import { type FakeHttpServer, startFakeHttpServer } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runBinary, runCli, startBinary } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * OpenTelemetry: with OTEL_EXPORTER_OTLP_ENDPOINT set, the real `agentloop` binary
 * exports its spans over OTLP/HTTP (JSON) to `<endpoint>/v1/traces`, flushed when it stops. The
 * collector here is a local HTTP server recording what is POSTed.
 */

/** The parts of an OTLP/JSON ExportTraceServiceRequest the assertions read. */
interface OtlpSpan {
  name: string;
  spanId: string;
  parentSpanId?: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
}
interface OtlpRequest {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: { scope: { name: string }; spans: OtlpSpan[] }[];
  }[];
}

let collector: FakeHttpServer;

beforeEach(async () => {
  collector = await startFakeHttpServer(() => ({ type: "json", body: {} }));
});

afterEach(() => collector.close());

function exported(): { serviceNames: string[]; spans: OtlpSpan[] } {
  const bodies = collector.requests
    .filter((request) => request.method === "POST" && request.path === "/v1/traces")
    .map((request) => request.body as OtlpRequest);
  const resourceSpans = bodies.flatMap((body) => body.resourceSpans);
  return {
    serviceNames: resourceSpans.flatMap((entry) =>
      entry.resource.attributes.filter((a) => a.key === "service.name").map((a) => a.value.stringValue ?? ""),
    ),
    spans: resourceSpans.flatMap((entry) => entry.scopeSpans.flatMap((scope) => scope.spans)),
  };
}

/** `child` names → `parent` name, from the exported parent ids. */
function parentNames(spans: OtlpSpan[]): Record<string, string> {
  const byId = new Map(spans.map((span) => [span.spanId, span]));
  return Object.fromEntries(
    spans.map((span) => [span.name, byId.get(span.parentSpanId ?? "")?.name ?? "(root)"]),
  );
}

describe("OTLP export from the CLI", () => {
  let server: NatsServer;
  let bus: NatsBus;

  beforeAll(async () => {
    server = await workerNatsServer();
    bus = await NatsBus.connect({ url: server.url, name: "otlp-export-test" });
  });

  afterAll(async () => {
    await bus.close();
    await server.stop();
  });

  it("serve: a chat's spans reach the collector when the host stops", async () => {
    const prefix = uniqueRoot();
    const binary = startBinary(["serve", "--nats", server.url, "--prefix", prefix], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `${collector.url}/` },
    });
    const serve: RunningServe = {
      run: binary.result,
      stop: () => {
        binary.child.kill("SIGINT");
        return binary.result;
      },
    };
    await waitUntilServing(bus, prefix, serve);
    const reply = await bus.request(
      chatSubject(prefix, "assistant"),
      JSON.stringify({ session: "traced", text: "what time is it?" }),
      { timeoutMs: 15_000 },
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true });
    const run = await serve.stop();
    expect(run.code).toBe(0);

    const { serviceNames, spans } = exported();
    expect(new Set(serviceNames)).toEqual(new Set(["agentloop"]));
    expect(parentNames(spans)).toEqual({
      "invoke_agent assistant": "(root)",
      iteration: "invoke_agent assistant",
      "chat demo": "iteration",
      "execute_tool current_time": "iteration",
    });
    expect(spans.map((span) => span.name).sort()).toEqual([
      "chat demo",
      "chat demo",
      "execute_tool current_time",
      "invoke_agent assistant",
      "iteration",
      "iteration",
    ]);
    const agentSpan = spans.find((span) => span.name === "invoke_agent assistant")!;
    expect(agentSpan.attributes).toContainEqual({
      key: "gen_ai.conversation.id",
      value: { stringValue: "traced" },
    });
  });
});

describe("chat --local with OTLP", () => {
  it("exports its spans under OTEL_SERVICE_NAME before it exits", async () => {
    const run = await runBinary(["chat", "--local", "--events", "none", "hello"], {
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
        OTEL_SERVICE_NAME: "my-agents",
      },
    });
    expect(run.code).toBe(0);
    const { serviceNames, spans } = exported();
    expect(serviceNames).toEqual(["my-agents"]);
    expect(spans.map((span) => span.name).sort()).toEqual([
      "chat demo",
      "invoke_agent assistant",
      "iteration",
    ]);
  });

  it("in-process too: the provider is flushed, then unregistered when the command ends", async () => {
    const run = await runCli(["chat", "--local", "--events", "none", "hello"], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
    });
    expect(run.code).toBe(0);
    expect(
      exported()
        .spans.map((span) => span.name)
        .sort(),
    ).toEqual(["chat demo", "invoke_agent assistant", "iteration"]);
    expect(registeredTracer()).toBeUndefined();
  });

  it("refuses an endpoint that is not an http(s) URL in one line", async () => {
    const run = await runCli(["chat", "--local", "hello"], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" },
    });
    expect(run.code).toBe(2);
    expect(linesOf(run.stderr)).toEqual([
      'agentloop: OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL, got "localhost:4318"',
    ]);
  });
});

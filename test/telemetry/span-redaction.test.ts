import { SpanStatusCode, trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { AuthenticationError, ServerError } from "../../src/llm/errors.js";
import { CAPTURE_CONTENT_ENV } from "../../src/telemetry/gen-ai-conventions.js";
import { redactingTracer } from "../../src/telemetry/redacting-tracer.js";
import { createSecretRedactor, REDACTED } from "../../src/text/secret-redactor.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * Regression: an API key echoed in a provider's error reached the `chat` span's status (and, with
 * content capture on, the model's and tools' output reached `gen_ai.*` attributes) unredacted,
 * while the events hid it. Every span of a session now hides the secrets the events hide.
 */

const KEY = "sk-ant-api03-span-secret-0123456789";
const redactor = createSecretRedactor([KEY]);

let exporter: InMemorySpanExporter;
let provider: BasicTracerProvider;

beforeEach(() => {
  exporter = new InMemorySpanExporter();
  provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  vi.stubEnv(CAPTURE_CONTENT_ENV, "");
});

afterEach(async () => {
  vi.unstubAllEnvs();
  trace.disable();
  await provider.shutdown();
});

/** Everything a span exports: name, attributes, status, events (with their attributes), links. */
function exported(span: ReadableSpan): string {
  return JSON.stringify({
    name: span.name,
    attributes: span.attributes,
    status: span.status,
    events: span.events,
    links: span.links,
  });
}

const leak = defineTool({
  name: "leak",
  description: "Prints the environment.",
  parameters: z.object({}),
  execute: () => `ANTHROPIC_API_KEY=${KEY}`,
});

describe("secrets in spans", () => {
  it("a provider error quoting the key: status, reset events and attributes are redacted", async () => {
    const { agent } = await createTestAgent({
      script: [
        { error: new ServerError(`upstream refused key ${KEY}`) },
        { error: new AuthenticationError(`invalid x-api-key: ${KEY}`) },
      ],
      redactor,
      tracing: { tracer: provider.getTracer("agentloop-test"), captureContent: true },
    });
    await expect(agent.chat(`my key is ${KEY}`)).rejects.toThrow(REDACTED);

    const spans = exporter.getFinishedSpans();
    expect(spans.length).toBeGreaterThan(0);
    for (const span of spans) expect(exported(span), span.name).not.toContain(KEY);
    const failed = spans.find((span) => span.name === "chat scripted-model");
    expect(failed?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: `invalid x-api-key: ${REDACTED}`,
    });
    // The prompt with the key went out as content: redacted, not dropped.
    expect(JSON.stringify(failed?.attributes)).toContain(REDACTED);
  });

  it("with content capture: the model's answer and a tool's result are redacted in every span", async () => {
    const { agent } = await createTestAgent({
      script: [{ toolCalls: [{ name: "leak" }] }, { text: `found it: ${KEY}` }],
      tools: [leak],
      redactor,
      tracing: { tracer: provider.getTracer("agentloop-test"), captureContent: true },
    });
    expect((await agent.chat("find the key")).result).toBe(`found it: ${REDACTED}`);
    const spans = exporter.getFinishedSpans();
    for (const span of spans) expect(exported(span), span.name).not.toContain(KEY);
    const outputs = spans.map((span) => span.attributes["gen_ai.output.messages"]).filter(Boolean);
    expect(outputs.join("\n")).toContain(`found it: ${REDACTED}`);
  });

  it("wraps any span: exceptions, event attributes, status, links and later attributes", () => {
    const tracer = redactingTracer(provider.getTracer("agentloop-test"), redactor);
    const span = tracer.startSpan(`op ${KEY}`, { attributes: { a: KEY, list: [KEY, "x"], n: 1 } });
    span.setAttribute("b", `b ${KEY}`);
    span.setAttributes({ c: KEY });
    span.addEvent("e", { d: KEY });
    const error = new Error(`boom ${KEY}`);
    span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: `failed: ${KEY}` });
    span.end();
    const [finished] = exporter.getFinishedSpans();
    expect(exported(finished!)).not.toContain(KEY);
    expect(finished!.attributes).toMatchObject({
      a: REDACTED,
      list: [REDACTED, "x"],
      n: 1,
      b: `b ${REDACTED}`,
    });
    expect(finished!.events.map((event) => event.attributes)).toContainEqual(
      expect.objectContaining({ "exception.message": `boom ${REDACTED}` }),
    );
    // The caller's error is left as it was.
    expect(error.message).toBe(`boom ${KEY}`);
    // With no secrets there is nothing to wrap.
    const plain = provider.getTracer("plain");
    expect(redactingTracer(plain, createSecretRedactor([]))).toBe(plain);
  });
});

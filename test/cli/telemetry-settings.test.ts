import { DiagLogLevel } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/cli-context.js";
import { telemetrySettings } from "../../src/cli/telemetry.js";

/** The standard OTEL_* variables the CLI reads to decide whether, and where, it exports spans. */
describe("telemetry settings from the environment", () => {
  it("are off without an endpoint", () => {
    expect(telemetrySettings({})).toBeUndefined();
    expect(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "  " })).toBeUndefined();
  });

  it("append /v1/traces to the general endpoint, keeping its path; the traces endpoint is used as it is", () => {
    expect(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })?.tracesUrl).toBe(
      "http://collector:4318/v1/traces",
    );
    expect(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://otel.example/api/" })?.tracesUrl).toBe(
      "https://otel.example/api/v1/traces",
    );
    expect(
      telemetrySettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:9999/custom",
      })?.tracesUrl,
    ).toBe("http://traces:9999/custom");
  });

  it("name the service from OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES, else agentloop", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    expect(telemetrySettings(endpoint)?.serviceName).toBe("agentloop");
    const withResource = telemetrySettings({
      ...endpoint,
      OTEL_RESOURCE_ATTRIBUTES: "service.name=from-resource,deployment.environment=staging%20eu,broken",
    });
    expect(withResource).toMatchObject({
      serviceName: "from-resource",
      resourceAttributes: { "service.name": "from-resource", "deployment.environment": "staging eu" },
    });
    expect(
      telemetrySettings({
        ...endpoint,
        OTEL_SERVICE_NAME: "agents",
        OTEL_RESOURCE_ATTRIBUTES: "service.name=x",
      }),
    ).toMatchObject({ serviceName: "agents" });
  });

  it("stay off when the SDK is disabled or the traces exporter is none", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    expect(telemetrySettings({ ...endpoint, OTEL_SDK_DISABLED: "true" })).toBeUndefined();
    expect(telemetrySettings({ ...endpoint, OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
    expect(telemetrySettings({ ...endpoint, OTEL_TRACES_EXPORTER: "otlp" })).toBeDefined();
  });

  it("refuse what cannot work, naming the variable", () => {
    const refusal = (env: NodeJS.ProcessEnv) => {
      try {
        telemetrySettings(env);
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      return "accepted";
    };
    expect(refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toBe(
      'OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL, got "collector:4318"',
    );
    expect(refusal({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "not a url" })).toBe(
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http(s) URL, got "not a url"',
    );
    expect(
      refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }),
    ).toBe("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: agentloop exports OTLP/HTTP");
    expect(refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_LOG_LEVEL: "loud" })).toBe(
      'OTEL_LOG_LEVEL must be one of none, error, warn, info, debug, verbose, all, got "loud"',
    );
    expect(
      telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_LOG_LEVEL: "WARN" })?.logLevel,
    ).toBe(DiagLogLevel.WARN);
  });
});

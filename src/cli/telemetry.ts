import { type DiagLogger, DiagLogLevel, diag, trace } from "@opentelemetry/api";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";
import { describeError } from "../errors/describe-error.js";
import { TRACER_VERSION } from "../telemetry/agent-tracing.js";
import { type CliContext, type Command, UsageError } from "./cli-context.js";

/**
 * The CLI's OpenTelemetry SDK: when the standard OTLP variables name an endpoint, spans are
 * batched and exported over OTLP/HTTP (JSON), and flushed when the command ends. The library
 * itself only uses `@opentelemetry/api`; registering this provider globally is what turns its
 * tracing on (agents check for a provider when they are created).
 *
 * Read from the command's environment: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended), `OTEL_SERVICE_NAME` (default
 * `agentloop`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SDK_DISABLED`, `OTEL_TRACES_EXPORTER=none`,
 * `OTEL_LOG_LEVEL` (the SDK's own diagnostics, on stderr). The exporter and the batch processor
 * read the rest themselves (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`, `OTEL_BSP_*`), as does the
 * sampler (`OTEL_TRACES_SAMPLER`).
 *
 * @see https://opentelemetry.io/docs/specs/otel/protocol/exporter/
 * @see https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/
 */

export const DEFAULT_SERVICE_NAME = "agentloop";

export interface TelemetrySettings {
  /** Where spans are POSTed. */
  tracesUrl: string;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  logLevel: DiagLogLevel | undefined;
}

export interface Telemetry {
  readonly tracesUrl: string;
  /** Exports what is still buffered, then unregisters the provider. Never rejects. */
  shutdown(): Promise<void>;
}

const LOG_LEVELS: Record<string, DiagLogLevel> = {
  none: DiagLogLevel.NONE,
  error: DiagLogLevel.ERROR,
  warn: DiagLogLevel.WARN,
  info: DiagLogLevel.INFO,
  debug: DiagLogLevel.DEBUG,
  verbose: DiagLogLevel.VERBOSE,
  all: DiagLogLevel.ALL,
};

function setting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === "" ? undefined : value;
}

function httpUrl(text: string, variable: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`${variable} must be an http(s) URL, got "${text}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`${variable} must be an http(s) URL, got "${text}"`);
  }
  return url.href;
}

/** `key=value,key2=value2`, values percent-encoded (the W3C Baggage format the spec uses). */
function parseResourceAttributes(text: string | undefined): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const pair of (text ?? "").split(",")) {
    const separator = pair.indexOf("=");
    if (separator <= 0) continue;
    try {
      attributes[pair.slice(0, separator).trim()] = decodeURIComponent(pair.slice(separator + 1).trim());
    } catch {
      // A badly encoded value is left out, as the SDK's own detector does.
    }
  }
  return attributes;
}

/** The settings the environment asks for, or undefined when tracing stays off. */
export function telemetrySettings(env: NodeJS.ProcessEnv): TelemetrySettings | undefined {
  if (setting(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return undefined;
  const exporters = setting(env, "OTEL_TRACES_EXPORTER")
    ?.split(",")
    .map((name) => name.trim());
  if (exporters?.includes("none")) return undefined;
  const specific = setting(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const general = setting(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  let tracesUrl: string;
  if (specific !== undefined) tracesUrl = httpUrl(specific, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  else if (general !== undefined) {
    // The signal's path is appended to the base URL's own path (spec: OTLP exporter configuration).
    tracesUrl = `${httpUrl(general, "OTEL_EXPORTER_OTLP_ENDPOINT").replace(/\/+$/, "")}/v1/traces`;
  } else return undefined;
  for (const variable of ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"]) {
    if (setting(env, variable) === "grpc") {
      throw new UsageError(`${variable}=grpc is not supported: agentloop exports OTLP/HTTP`);
    }
  }
  const level = setting(env, "OTEL_LOG_LEVEL")?.toLowerCase();
  if (level !== undefined && LOG_LEVELS[level] === undefined) {
    throw new UsageError(
      `OTEL_LOG_LEVEL must be one of ${Object.keys(LOG_LEVELS).join(", ")}, got "${level}"`,
    );
  }
  const resourceAttributes = parseResourceAttributes(env.OTEL_RESOURCE_ATTRIBUTES);
  return {
    tracesUrl,
    serviceName:
      setting(env, "OTEL_SERVICE_NAME") ?? resourceAttributes[ATTR_SERVICE_NAME] ?? DEFAULT_SERVICE_NAME,
    resourceAttributes,
    logLevel: level === undefined ? undefined : LOG_LEVELS[level],
  };
}

function stderrLogger(stderr: NodeJS.WritableStream): DiagLogger {
  const write =
    (level: string) =>
    (message: string, ...args: unknown[]) => {
      const extra = args.map((arg) => describeError(arg)).join(" ");
      stderr.write(`agentloop: opentelemetry ${level}: ${message}${extra === "" ? "" : ` ${extra}`}\n`);
    };
  return {
    error: write("error"),
    warn: write("warn"),
    info: write("info"),
    debug: write("debug"),
    verbose: write("verbose"),
  };
}

/**
 * Starts the SDK when the environment asks for it (undefined otherwise) and registers it as the
 * global tracer provider. A bad setting is the user's to fix: a {@link UsageError}.
 */
export async function startTelemetry(
  env: NodeJS.ProcessEnv,
  stderr: NodeJS.WritableStream,
): Promise<Telemetry | undefined> {
  const settings = telemetrySettings(env);
  if (settings === undefined) return undefined;
  // The SDK is loaded only when tracing is on: it is half a second of CPU at every start-up.
  const [{ OTLPTraceExporter }, { resourceFromAttributes }, { BasicTracerProvider, BatchSpanProcessor }] =
    await Promise.all([
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/sdk-trace-base"),
    ]);
  if (settings.logLevel !== undefined) diag.setLogger(stderrLogger(stderr), settings.logLevel);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_VERSION]: TRACER_VERSION,
      ...settings.resourceAttributes,
      [ATTR_SERVICE_NAME]: settings.serviceName,
    }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: settings.tracesUrl }))],
  });
  // False when a provider is registered already (the embedding program's): that one is used.
  const isRegistered = trace.setGlobalTracerProvider(provider);
  return {
    tracesUrl: settings.tracesUrl,
    async shutdown() {
      try {
        await provider.shutdown();
      } catch {
        // The exporter reports its own failures through the diagnostics logger.
      } finally {
        if (isRegistered) trace.disable();
        if (settings.logLevel !== undefined) diag.disable();
      }
    },
  };
}

/**
 * A long-running command (`serve`, `up`, `chat --local`) with tracing around it: the SDK starts
 * before the command builds its agents and is flushed once the command has finished.
 */
export function withTelemetry(command: Command): Command {
  return async (context: CliContext) => {
    const telemetry = await startTelemetry(context.env, context.stderr);
    if (telemetry === undefined) return command(context);
    try {
      return await command(context);
    } finally {
      await telemetry.shutdown();
    }
  };
}

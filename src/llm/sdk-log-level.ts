/** The log levels both provider SDKs know. */
const SDK_LOG_LEVELS = ["debug", "info", "warn", "error", "off"] as const;
export type SdkLogLevel = (typeof SDK_LOG_LEVELS)[number];

/**
 * The SDK log level asked for by `ANTHROPIC_LOG` / `OPENAI_LOG` in the environment given, else
 * "off": every SDK failure reaches the caller as an error, so the SDK's own log lines (e.g. a
 * malformed frame, logged before it throws) would only repeat it. Passed explicitly, so the SDK
 * does not read `process.env` itself.
 */
export function sdkLogLevel(value: string | undefined): SdkLogLevel {
  const level = value?.trim().toLowerCase();
  return SDK_LOG_LEVELS.find((known) => known === level) ?? "off";
}

import { ConfigurationError } from "../errors/configuration-error.js";

/**
 * The one error for a hosted provider with neither an API key nor a base URL: a configuration
 * mistake (nothing was sent), the same from `createBackend` and from every backend's constructor.
 */
export function missingApiKeyError(provider: string, keyVariable: string): ConfigurationError {
  return new ConfigurationError(
    `provider ${provider} needs an API key: set ${keyVariable} (or give a base URL for a keyless server)`,
  );
}

/**
 * Environment variables a provider reads (API keys, base URLs): handed in, so a test or an
 * embedding application decides what the providers see.
 */
export type ProviderEnvironment = Record<string, string | undefined>;

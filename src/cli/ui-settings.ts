import { isValidAllowedHost } from "../http/http-guard.js";
import { UsageError } from "./cli-context.js";

type Flags = Record<string, string | boolean | undefined>;

/** How the web UI (of `ui` and `up`) lets people in: its token, extra host names, stream cap. */
export interface UiSettings {
  /** `--ui-token` (AGENTLOOP_UI_TOKEN): required on every API call, even on loopback. */
  token?: string;
  /** `--ui-allowed-hosts a,b` (AGENTLOOP_UI_ALLOWED_HOSTS): names the page may be reached by. */
  allowedHosts?: string[];
  /** `--ui-max-streams N` (AGENTLOOP_UI_MAX_STREAMS): event streams open at once. */
  maxStreams?: number;
}

/** A token the Authorization header carries as it is (RFC 6750's token68) and long enough to guess at. */
const TOKEN_PATTERN = /^[A-Za-z0-9._~+/-]{16,512}=*$/;
const MAX_STREAMS_LIMIT = 100_000;

/**
 * Reads `--ui-token`, `--ui-allowed-hosts` and `--ui-max-streams` (flags win over the environment).
 *
 * @throws UsageError naming the flag for a value it cannot take.
 */
export function uiSettingsFrom(flags: Flags, env: NodeJS.ProcessEnv): UiSettings {
  const token = pick(flags, "ui-token", env, "AGENTLOOP_UI_TOKEN");
  if (token !== undefined && !TOKEN_PATTERN.test(token)) {
    throw new UsageError(
      "--ui-token must be 16 to 512 characters of letters, digits and . _ ~ + / - (e.g. `openssl rand -hex 24`)",
    );
  }
  const hosts = pick(flags, "ui-allowed-hosts", env, "AGENTLOOP_UI_ALLOWED_HOSTS");
  let allowedHosts: string[] | undefined;
  if (hosts !== undefined) {
    allowedHosts = hosts.split(",").map((entry) => entry.trim().toLowerCase());
    const bad = allowedHosts.find((entry) => !isValidAllowedHost(entry));
    if (bad !== undefined) {
      throw new UsageError(
        `--ui-allowed-hosts takes host names or name:port, comma-separated, got "${bad}" in "${hosts}"`,
      );
    }
  }
  const streams = pick(flags, "ui-max-streams", env, "AGENTLOOP_UI_MAX_STREAMS");
  let maxStreams: number | undefined;
  if (streams !== undefined) {
    maxStreams = /^\d{1,6}$/.test(streams) ? Number(streams) : Number.NaN;
    if (!(maxStreams >= 1 && maxStreams <= MAX_STREAMS_LIMIT)) {
      throw new UsageError(
        `--ui-max-streams must be a whole number from 1 to ${MAX_STREAMS_LIMIT}, got "${streams}"`,
      );
    }
  }
  return {
    ...(token === undefined ? {} : { token }),
    ...(allowedHosts === undefined ? {} : { allowedHosts }),
    ...(maxStreams === undefined ? {} : { maxStreams }),
  };
}

function pick(flags: Flags, name: string, env: NodeJS.ProcessEnv, variable: string): string | undefined {
  const flag = flags[name];
  if (typeof flag === "string" && flag.trim() !== "") return flag.trim();
  const value = env[variable];
  return value !== undefined && value.trim() !== "" ? value.trim() : undefined;
}

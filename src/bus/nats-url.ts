import { BusConfigError } from "./bus-errors.js";

/** What a NATS URL (or a comma-separated list of them) says, in the client's terms. */
export interface NatsAddress {
  /** `host:port` of each server (the client takes no credentials in server addresses). */
  servers: string[];
  user?: string;
  pass?: string;
  token?: string;
  /** True when any URL used `tls://`: the connection must then be encrypted. */
  tls: boolean;
}

const DEFAULT_NATS_PORT = 4222;

/**
 * Reads `nats://user:pass@host:4222`, `nats://token@host`, `tls://host`, a bare `host:port`, or a
 * comma-separated list of those (the `NATS_URL` conventions of the NATS tools). The v3 client
 * does not read credentials from server URLs itself, and chokes on them in its host parser, so
 * they are split out here. Credentials are taken from the first URL that has any.
 *
 * @throws BusConfigError for an unparseable URL or a scheme other than `nats` / `tls`.
 */
export function parseNatsUrl(url: string): NatsAddress {
  const parts = url
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  if (parts.length === 0) throw new BusConfigError("the NATS URL is empty");

  const address: NatsAddress = { servers: [], tls: false };
  let hasCredentials = false;
  for (const part of parts) {
    const withScheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(part) ? part : `nats://${part}`;
    let parsed: URL;
    try {
      parsed = new URL(withScheme);
    } catch {
      throw new BusConfigError(`invalid NATS URL: ${redactNatsUrl(part)}`);
    }
    const scheme = parsed.protocol.slice(0, -1).toLowerCase();
    if (scheme !== "nats" && scheme !== "tls") {
      throw new BusConfigError(
        `unsupported NATS URL scheme "${scheme}" in ${redactNatsUrl(part)} (use nats:// or tls://)`,
      );
    }
    if (parsed.hostname === "") throw new BusConfigError(`no host in NATS URL: ${redactNatsUrl(part)}`);
    if (scheme === "tls") address.tls = true;
    const port = parsed.port === "" ? DEFAULT_NATS_PORT : Number(parsed.port);
    address.servers.push(`${parsed.hostname}:${port}`);

    if (!hasCredentials && parsed.username !== "") {
      hasCredentials = true;
      const name = decodeURIComponent(parsed.username);
      if (parsed.password !== "") {
        address.user = name;
        address.pass = decodeURIComponent(parsed.password);
      } else {
        address.token = name;
      }
    }
  }
  return address;
}

/** The URL with any credentials replaced by `***`: safe to print or put in an error. */
export function redactNatsUrl(url: string): string {
  return url.replace(/(^|,|\/\/)([^,/@]*)@/g, "$1***@");
}

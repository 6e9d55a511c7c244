import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium } from "playwright-core";

/** Debian's Chromium, the browser the UI tests drive when it is installed. */
export const SYSTEM_CHROMIUM_PATH = "/usr/bin/chromium";

/** Which browser the UI tests run, and where it came from (for the failure message and the log). */
export interface ChromiumExecutable {
  path: string;
  source: "CHROMIUM_PATH" | "system" | "@sparticuz/chromium";
  /** Extra environment the browser needs (the npm build brings its own fonts). */
  env?: Record<string, string>;
}

let resolved: Promise<ChromiumExecutable> | undefined;

/**
 * Finds the browser for the UI tests, in order: `CHROMIUM_PATH` (must exist), Debian's
 * `/usr/bin/chromium`, else the headless Chromium shipped inside the `@sparticuz/chromium`
 * devDependency, unpacked to the temp dir on first use (it needs only glibc, so `npm ci && npm test`
 * passes on a machine with Node and nats-server but no system browser). Throws, never skips.
 */
export function resolveChromium(): Promise<ChromiumExecutable> {
  resolved ??= findChromium();
  return resolved;
}

/** {@link resolveChromium} without the cache, with the places to look injectable (for its own test). */
export async function findChromium(
  options: { env?: NodeJS.ProcessEnv; systemPath?: string } = {},
): Promise<ChromiumExecutable> {
  const { env = process.env, systemPath = SYSTEM_CHROMIUM_PATH } = options;
  const configured = env.CHROMIUM_PATH;
  if (configured !== undefined && configured !== "") {
    if (!existsSync(configured)) throw new Error(`CHROMIUM_PATH=${configured} does not exist`);
    return { path: configured, source: "CHROMIUM_PATH" };
  }
  if (existsSync(systemPath)) return { path: systemPath, source: "system" };
  try {
    const { default: packaged } = await import("@sparticuz/chromium");
    // The package's fonts.conf is unpacked next to the binary; without it a machine with no fonts
    // renders every label as boxes of the wrong width.
    const path = await packaged.executablePath();
    return { path, source: "@sparticuz/chromium", env: { FONTCONFIG_PATH: join(tmpdir(), "fonts") } };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `no Chromium for the UI tests: set CHROMIUM_PATH, install Debian's chromium (apt-get install -y chromium), ` +
        `or keep the @sparticuz/chromium devDependency installed (it failed: ${reason})`,
    );
  }
}

/**
 * Launches headless Chromium the way the UI suites do: no sandbox (containers), no GPU, and nothing
 * that reaches the network on its own (no background updates, sync or QUIC), in a fresh temporary
 * profile. `args` are added to the command line (e.g. `--host-resolver-rules` to point a name at
 * 127.0.0.1).
 */
export async function launchChromium(
  executable?: ChromiumExecutable,
  options: { args?: readonly string[] } = {},
): Promise<Browser> {
  executable ??= await resolveChromium();
  return chromium.launch({
    executablePath: executable.path,
    headless: true,
    ...(executable.env === undefined ? {} : { env: { ...process.env, ...executable.env } }),
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
      ...(options.args ?? []),
    ],
  });
}

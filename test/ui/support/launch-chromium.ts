import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

/** Debian's Chromium, the browser the UI tests drive (SPEC §13). */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/**
 * Launches headless Chromium the way the UI suites do: no sandbox (containers), no GPU, and nothing
 * that reaches the network on its own (no background updates, sync or QUIC), in a fresh temporary
 * profile. Throws, rather than letting a suite skip, when Chromium is not installed.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `${CHROMIUM_PATH} is missing: install Debian's chromium (apt-get install -y chromium) to run the UI tests`,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  });
}

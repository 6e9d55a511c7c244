import type { Browser } from "playwright-core";
import { afterEach, describe, expect, it } from "vitest";
import { findChromium, launchChromium } from "./support/launch-chromium.js";

/**
 * `npm test` on a fresh machine: with no CHROMIUM_PATH and no system browser, the UI suites fall
 * back to the Chromium shipped in the @sparticuz/chromium devDependency, and that browser renders.
 */
describe("the browser the UI tests run", () => {
  let browser: Browser | undefined;
  afterEach(async () => {
    await browser?.close();
    browser = undefined;
  });

  it("prefers CHROMIUM_PATH and refuses one that does not exist", async () => {
    await expect(findChromium({ env: { CHROMIUM_PATH: "/nonexistent/chromium" } })).rejects.toThrow(
      "CHROMIUM_PATH=/nonexistent/chromium does not exist",
    );
    const configured = await findChromium({ env: { CHROMIUM_PATH: process.execPath } });
    expect(configured).toEqual({ path: process.execPath, source: "CHROMIUM_PATH" });
  });

  it("uses the system Chromium when it is there", async () => {
    const found = await findChromium({ env: {}, systemPath: process.execPath });
    expect(found).toEqual({ path: process.execPath, source: "system" });
  });

  it("without either, unpacks the npm-shipped Chromium and renders a page with text in it", async () => {
    const found = await findChromium({ env: {}, systemPath: "/nonexistent/chromium" });
    expect(found.source).toBe("@sparticuz/chromium");
    browser = await launchChromium(found);
    const page = await browser.newPage({ viewport: { width: 400, height: 200 } });
    await page.setContent('<p id="label" style="font: 12px sans-serif">iterating</p>');
    const box = await page.locator("#label").boundingBox();
    expect(await page.locator("#label").textContent()).toBe("iterating");
    // Text really laid out with a font: a label of 9 characters at 12 px is wider than a few px.
    expect(box?.width ?? 0).toBeGreaterThan(20);
  });
});

import { afterEach, beforeEach, expect, vi } from "vitest";

/**
 * House rule: tests fail on unexpected console output. Anything a test prints through `console`
 * is collected and fails that test, so a stray warning (an SDK deprecation notice, a swallowed
 * error logged instead of handled) is seen, not scrolled past.
 */
const METHODS = ["log", "info", "warn", "error", "debug"] as const;
let printed: string[] = [];

beforeEach(() => {
  printed = [];
  for (const method of METHODS) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      printed.push(`console.${method}: ${args.map(String).join(" ")}`);
    });
  }
});

afterEach(() => {
  vi.restoreAllMocks();
  expect(printed, "unexpected console output").toEqual([]);
});

import { execFile } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { assertFreshBuild } from "../support/fresh-build.js";

/**
 * `npm test` runs the example project's own tests (examples/support-desk): a project that depends on
 * `agentloop` by path, defines its agents in agentloop.config.js and tests them with
 * `agentloop/testing` in vitest. Installing it offline is one link, what `npm install` makes of its
 * `"agentloop": "file:../.."` dependency; everything else resolves from this repository.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const EXAMPLE = join(ROOT, "examples/support-desk");
const run = promisify(execFile);

function linkAgentloop(): void {
  const link = join(EXAMPLE, "node_modules/agentloop");
  if (existsSync(link) || isDanglingLink(link)) return;
  mkdirSync(dirname(link), { recursive: true });
  symlinkSync("../../..", link, "dir");
}

function isDanglingLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

describe("examples/support-desk", () => {
  it("passes its own vitest suite against the built package", async () => {
    // The example imports the built package: old code would be checked.
    assertFreshBuild();
    linkAgentloop();
    // The bin of the vitest this repository runs (its package exports no path to it).
    const vitest = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");
    const result = await run(process.execPath, [vitest, "run", "--reporter=dot"], {
      cwd: EXAMPLE,
      env: { ...process.env, CI: "true", NO_COLOR: "1" },
      timeout: 120_000,
    }).catch((error: { code?: number; stdout?: string; stderr?: string }) => error);
    const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
    expect(output, output).toMatch(/Tests\s+\d+ passed \(\d+\)/);
    expect(output).not.toMatch(/failed/);
  }, 150_000);
});

import { describe, expect, it } from "vitest";
import { nodeAdvice } from "../../src/cli/node-advice.js";
import { runBinary } from "../support/cli.js";

/** On Node 20, `npm start` says once that Node 22 or 24 is recommended; nothing else changes. */

describe("the Node advice of npm start", () => {
  it("speaks for Node 20 under npm start only", () => {
    const start = { npm_lifecycle_event: "start" };
    expect(nodeAdvice("v20.19.5", start)).toBe(
      "agentloop: Node 20.19.5 works, on a best-effort basis; Node 22 or 24 is recommended (Node 20 reached its end of life in April 2026)",
    );
    expect(nodeAdvice("v22.12.0", start)).toBeUndefined();
    expect(nodeAdvice("v24.1.0", start)).toBeUndefined();
    expect(nodeAdvice("v20.19.5", {})).toBeUndefined();
    expect(nodeAdvice("v20.19.5", { npm_lifecycle_event: "test" })).toBeUndefined();
  });

  it("the built binary prints it once, before the command's own output", async () => {
    const run = await runBinary(["--version"], { env: { npm_lifecycle_event: "start" } });
    expect(run.code).toBe(0);
    const expected = nodeAdvice(process.version, { npm_lifecycle_event: "start" });
    expect(run.stderr).toBe(expected === undefined ? "" : `${expected}\n`);
  });
});

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { cleanEnv, linesOf, runCli } from "../support/cli.js";

/**
 * `chat --local --agents FILE | --config FILE`: the file's agents run in this process (a host on
 * the in-process bus), so a configured agent, its tools and its approvals can be tried without
 * NATS. The demo notice appears only for an agent that really runs the demo model.
 */

let directory: string;
let agentsFile: string;
let configFile: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "agentloop-local-agents-"));
  agentsFile = join(directory, "agents.json");
  await writeFile(agentsFile, JSON.stringify({ agents: [{ name: "helper", tools: ["current_time"] }] }));
  configFile = join(directory, "agentloop.config.mjs");
  await writeFile(
    configFile,
    'export default { agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"] }] };\n',
  );
});

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

function capture(): { stream: Writable; text: () => string } {
  let text = "";
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      text += String(chunk);
      callback();
    },
  });
  return { stream, text: () => text };
}

describe("chat --local with an agents or config file", () => {
  it("--agents: the file's only agent answers, with its tools", { timeout: 30_000 }, async () => {
    const run = await runCli(["chat", "--local", "--agents", agentsFile, "what time is it?"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^\[demo\] The current time is /);
    expect(linesOf(run.stderr)).toEqual([expect.stringMatching(/^agentloop: using the demo model/)]);
  });

  it(
    "--config: a tool needing approval is asked on stdin and runs once approved",
    { timeout: 30_000 },
    async () => {
      const stdin = new PassThrough();
      const stdout = capture();
      const stderr = capture();
      const running = main(
        ["chat", "--local", "--config", configFile, "--events", "jsonl", "what time is it?"],
        {
          stdout: stdout.stream,
          stderr: stderr.stream,
          stdin,
          env: cleanEnv(),
          signal: new AbortController().signal,
        },
      );
      stdin.end("y\n");
      expect(await running).toBe(0);
      expect(stderr.text()).toContain("approve current_time({})? [y/N] ");
      const kinds = linesOf(stdout.text()).map((line) => (JSON.parse(line) as { kind: string }).kind);
      expect(kinds).toContain("ToolApprovalResolved");
      expect(kinds).toContain("ToolCallCompleted");
      expect(kinds.at(-1)).toBe("Result");
    },
  );

  it("an agent the file lacks, and the file flags without --local, are one-line usage errors", async () => {
    expect(await runCli(["chat", "--local", "--agents", agentsFile, "--agent", "ghost", "hi"])).toEqual({
      code: 2,
      stdout: "",
      stderr: `agentloop: no agent named "ghost" in ${agentsFile} (it has: helper)\n`,
    });
    expect(await runCli(["chat", "--agents", agentsFile, "hi"])).toEqual({
      code: 2,
      stdout: "",
      stderr:
        "agentloop: --agents and --config go with --local (a remote chat talks to the agents its host serves)\n",
    });
  });
});

import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createShellToolSet, NO_SHELL_ISOLATION_NOTICE } from "../../src/tools/shell.js";
import { findShellIsolation } from "../../src/tools/shell-isolation.js";
import { createTestToolContext } from "./tool-context.js";

/**
 * Regression: a `shell` command read the host's API key from `/proc/<host pid>/environ` (and
 * printed it base64'd, past any exact-match redaction). Commands now run in a PID namespace of
 * their own with their own /proc where the machine allows it (`unshare`, else `bwrap`); where it
 * does not, the host logs once that they run without isolation.
 */

const SHELL_MODULE = fileURLToPath(new URL("../../dist/src/tools/shell.js", import.meta.url));
const MARKER = "host-marker-secret-7f3a9c2e51";

let workspace: string;
beforeAll(async () => {
  workspace = await mkdtemp(join(tmpdir(), "agentloop-shell-isolation-"));
});
afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

/**
 * Runs `command` through the built shell tool in a separate Node process whose own environment
 * holds MARKER (a process's /proc environ is what it was started with), the way a host started
 * with an API key runs it. `isolated` false: with isolation switched off (the control).
 */
function runInHost(command: string, isolated: boolean): Promise<{ result: string; logged: string[] }> {
  const script = `
    const { createShellToolSet } = await import(${JSON.stringify(SHELL_MODULE)});
    const logged = [];
    const shell = createShellToolSet({
      workingDirectory: ${JSON.stringify(workspace)},
      env: { PATH: process.env.PATH },
      log: (line) => logged.push(line),
      ${isolated ? "" : "isolations: [],"}
    });
    const command = ${JSON.stringify(command)}.replaceAll("HOST_PID", String(process.pid));
    const result = await shell.invoke(
      { id: "c1", name: "shell", arguments: JSON.stringify({ command }) },
      { agent: "a", session: "s", signal: new AbortController().signal, appendMessage() {} },
    );
    process.stdout.write(JSON.stringify({ result, logged }));
  `;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--input-type=module", "-e", script],
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOST_MARKER: MARKER }, timeout: 30_000 },
      (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as { result: string; logged: string[] });
      },
    );
  });
}

const SNOOP = [
  "cat /proc/HOST_PID/environ",
  "cat /proc/$PPID/environ",
  "cat /proc/1/environ",
  "cat /proc/*/environ",
  "cat /proc/*/environ | base64",
  "ps eax",
]
  .map((command) => `${command} 2>/dev/null; echo`)
  .join("; ");

describe("the shell tool keeps the host's process environment out of reach", () => {
  it("without isolation a command reads the host's environ (the control: the snoop works)", async () => {
    const { result, logged } = await runInHost(SNOOP, false);
    expect(result).toContain(MARKER);
    expect(logged).toEqual([NO_SHELL_ISOLATION_NOTICE]);
  });

  it("with isolation (where the machine has it) no command sees the host's environ; else the host says so", async () => {
    const isolation = await findShellIsolation();
    const { result, logged } = await runInHost(SNOOP, true);
    if (isolation === undefined) {
      expect(logged).toEqual([NO_SHELL_ISOLATION_NOTICE]);
      return;
    }
    expect(result).toMatch(/^exit code: 0\n/);
    expect(result).not.toContain(MARKER);
    expect(result).not.toContain(Buffer.from(MARKER).toString("base64").slice(0, 16));
    expect(logged).toEqual([]);
  });

  it("says once per log that commands run without isolation, and runs them", async () => {
    const logged: string[] = [];
    const shell = createShellToolSet({
      workingDirectory: workspace,
      isolations: [{ name: "missing", prefix: ["/nonexistent/agentloop-unshare"] }],
      log: (line) => logged.push(line),
    });
    const run = () =>
      shell.invoke({ id: "c1", name: "shell", arguments: '{"command":"echo hi"}' }, createTestToolContext());
    expect(await run()).toBe("exit code: 0\nhi\n");
    expect(await run()).toBe("exit code: 0\nhi\n");
    expect(logged).toEqual([NO_SHELL_ISOLATION_NOTICE]);
  });

  it("isolated, a command still exits with its status and is killed at its timeout", async () => {
    const isolation = await findShellIsolation();
    if (isolation === undefined) return;
    const shell = createShellToolSet({ workingDirectory: workspace });
    const run = (args: object) =>
      shell.invoke({ id: "c1", name: "shell", arguments: JSON.stringify(args) }, createTestToolContext());
    expect(await run({ command: "echo pid $$; exit 4" })).toBe("exit code: 4\npid 1\n");
    expect(await run({ command: "echo started; sleep 30 & sleep 30", timeoutSeconds: 0.3 })).toBe(
      "timed out after 300 ms (killed)\nstarted\n",
    );
  });
});

import { mkdir, mkdtemp, realpath, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createShellToolSet } from "../../src/tools/shell.js";
import { ToolArgumentsError, ToolError } from "../../src/tools/tool-errors.js";
import { createTestToolContext } from "./tool-context.js";

let workspace: string;

beforeAll(async () => {
  workspace = await mkdtemp(join(tmpdir(), "agentloop-shell-"));
  await mkdir(join(workspace, "sub"));
});

afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

function shell(args: Record<string, unknown>, context = createTestToolContext(), options = {}) {
  const toolSet = createShellToolSet({ workingDirectory: workspace, ...options });
  return toolSet.invoke({ id: "c1", name: "shell", arguments: JSON.stringify(args) }, context);
}

describe("shell ToolSet", () => {
  it("offers one tool and names the workspace in its prompt", () => {
    const toolSet = createShellToolSet({ workingDirectory: workspace });
    expect(toolSet.tools().map((tool) => tool.name)).toEqual(["shell"]);
    expect(toolSet.prompt()).toContain(workspace);
  });

  it("runs a command in the workspace and returns the exit code and output", async () => {
    expect(await shell({ command: "pwd; echo hello" })).toBe(`exit code: 0\n${workspace}\nhello\n`);
    expect(await shell({ command: "pwd", cwd: "sub" })).toBe(`exit code: 0\n${join(workspace, "sub")}\n`);
  });

  it("reports a failing command's exit code and stderr (not a tool error)", async () => {
    expect(await shell({ command: "echo oops >&2; exit 3" })).toBe("exit code: 3\noops\n");
    expect(await shell({ command: "true" })).toBe("exit code: 0\n(no output)");
  });

  it("kills a command that runs past its timeout, with everything it started", async () => {
    const result = await shell({ command: "echo started; sleep 30 & sleep 30", timeoutSeconds: 0.2 });
    expect(result).toBe("timed out after 200 ms (killed)\nstarted\n");
  });

  it("caps the output", async () => {
    const result = await shell({ command: "yes x | head -c 50000" }, createTestToolContext(), {
      maxOutputChars: 100,
    });
    expect(result).toBe(`exit code: 0\n${"x\n".repeat(50)}\n[output truncated]`);
  });

  it("cuts the output on whole characters: never half an emoji (a lone surrogate poisons the session)", async () => {
    const result = await shell({ command: "printf '😀😀😀'" }, createTestToolContext(), {
      maxOutputChars: 5,
    });
    expect(result).toBe("exit code: 0\n😀😀\n[output truncated]");
    expect(result.isWellFormed()).toBe(true);
  });

  it("decodes a character split between two writes whole", async () => {
    const result = await shell({ command: "printf '\\360\\237'; sleep 0.1; printf '\\230\\200\\n'" });
    expect(result).toBe("exit code: 0\n😀\n");
  });

  it("gives commands PATH, HOME and the locale, plus the names in passEnv, and nothing else", async () => {
    const env = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: "/home/agent",
      LANG: "C.UTF-8",
      ANTHROPIC_API_KEY: "sk-ant-secret",
      DEPLOY_TOKEN: "granted",
    };
    const result = await shell(
      { command: 'echo "[$HOME][$LANG][$ANTHROPIC_API_KEY][$DEPLOY_TOKEN]"' },
      createTestToolContext(),
      { env, passEnv: ["DEPLOY_TOKEN"] },
    );
    expect(result).toBe("exit code: 0\n[/home/agent][C.UTF-8][][granted]\n");
  });

  it("checks cwd after resolving symlinks: a link inside the workspace cannot lead out", async () => {
    await symlink("/", join(workspace, "escape"));
    await symlink(join(workspace, "sub"), join(workspace, "inner"));
    await expect(shell({ command: "pwd", cwd: "escape" })).rejects.toThrow(/inside the workspace/);
    await expect(shell({ command: "pwd", cwd: "escape/tmp" })).rejects.toThrow(/inside the workspace/);
    expect(await shell({ command: "pwd", cwd: "inner" })).toBe(
      `exit code: 0\n${await realpath(join(workspace, "sub"))}\n`,
    );
  });

  it("refuses a working directory outside the workspace and bad arguments", async () => {
    await expect(shell({ command: "ls", cwd: "../.." })).rejects.toBeInstanceOf(ToolError);
    await expect(shell({ command: "ls", cwd: "/etc" })).rejects.toThrow(/inside the workspace/);
    await expect(shell({ command: "ls", cwd: "missing" })).rejects.toThrow(/cannot run the command/);
    await expect(shell({ command: "" })).rejects.toBeInstanceOf(ToolArgumentsError);
  });

  it("redacts secrets before it cuts the output: a key at the cut is hidden whole, not shown but for its end", async () => {
    const key = "sk-test-SECRET1234567890abcdef";
    const redact = (text: string) => text.replaceAll(key, "[redacted]");
    // The key starts 10 characters before the cap.
    const result = await shell(
      { command: `head -c 90 /dev/zero | tr '\\0' x; printf '%s' "${key}"; echo after` },
      createTestToolContext({ redact }),
      { maxOutputChars: 100 },
    );
    expect(result).toBe(`exit code: 0\n${"x".repeat(90)}[redacted]\n[output truncated]`);
    // Without a key in it, the cut is where it was.
    const plain = await shell(
      { command: "head -c 150 /dev/zero | tr '\\0' y" },
      createTestToolContext({ redact }),
      {
        maxOutputChars: 100,
      },
    );
    expect(plain).toBe(`exit code: 0\n${"y".repeat(100)}\n[output truncated]`);
  });

  it("stops the command when the chat is cancelled", async () => {
    const controller = new AbortController();
    const running = shell({ command: "sleep 30" }, createTestToolContext({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    await expect(running).rejects.toThrow("cancelled");
  });

  it("runs a command in the background and posts its result as a task_result", async () => {
    const post = vi.fn();
    const result = await shell(
      { command: "echo 'a <b>'", background: true },
      createTestToolContext({ post }),
      { createTaskId: () => "task-7" },
    );
    expect(result).toBe("started background task task-7; its result will arrive as a task_result message");
    await vi.waitFor(() => expect(post).toHaveBeenCalledTimes(1));
    expect(post).toHaveBeenCalledWith(
      '<task_result id="task-7" status="completed" label="echo &apos;a &lt;b&gt;&apos;">exit code: 0\na &lt;b&gt;\n</task_result>',
      { type: "task_result", stackable: true },
    );
  });

  it("redacts a background command's output before cutting it", async () => {
    const key = "sk-test-SECRET1234567890abcdef";
    const post = vi.fn();
    await shell(
      // The command spells the key in two parts, so only its output holds it whole.
      {
        command: `head -c 85 /dev/zero | tr '\\0' x; echo "sk-test-SECRET""1234567890abcdef"`,
        background: true,
      },
      createTestToolContext({ post, redact: (text) => text.replaceAll(key, "[redacted]") }),
      { createTaskId: () => "task-8", maxOutputChars: 100 },
    );
    await vi.waitFor(() => expect(post).toHaveBeenCalledTimes(1));
    const posted = String(post.mock.calls[0]?.[0]);
    expect(posted).toContain(`${"x".repeat(85)}[redacted]`);
    expect(posted).not.toContain(key);
    expect(posted).not.toContain("SECRET1234");
  });

  it("reset cancels the session's background commands without posting; copies are independent", async () => {
    const post = vi.fn();
    const template = createShellToolSet({ workingDirectory: workspace, createTaskId: () => "task-1" });
    const session = template.copy();
    const other = template.copy();
    const context = createTestToolContext({ post });
    const call = {
      id: "c1",
      name: "shell",
      arguments: JSON.stringify({ command: "sleep 30", background: true }),
    };
    await session.invoke(call, context);
    await other.invoke(call, context);
    expect(session.iterationPromptInjection()).toBe("Background shell tasks still running: task-1.");
    session.reset();
    expect(session.iterationPromptInjection()).toBe("");
    expect(other.iterationPromptInjection()).toContain("task-1");
    other.reset();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(post).not.toHaveBeenCalled();
  });
});

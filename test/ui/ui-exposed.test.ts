import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/cli-context.js";
import { uiSettingsFrom } from "../../src/cli/ui-settings.js";
import { runCli, stackLines, startBinary, waitFor } from "../support/cli.js";

/**
 * `agentloop ui` bound beyond loopback, as a real process: it makes up a token, prints it in the
 * URL with a warning, and refuses API calls without it. And the UI flags' parsing.
 */

describe("agentloop ui --host 0.0.0.0 (the built binary)", () => {
  it("prints a token URL and a warning, and refuses a call without the token", async () => {
    const running = startBinary(["ui", "--host", "0.0.0.0", "--port", "0", "--nats", "nats://127.0.0.1:1"]);
    let stdout = "";
    let stderr = "";
    running.child.stdout?.on("data", (text: string) => {
      stdout += text;
    });
    running.child.stderr?.on("data", (text: string) => {
      stderr += text;
    });
    try {
      await waitFor(() => /^agentloop ui: http:\/\/\S+ \(bus: local\)$/m.test(stdout), 60_000);
      const printed = /^agentloop ui: (http:\/\/\S+) \(bus: local\)$/m.exec(stdout)![1]!;
      const url = new URL(printed);
      expect(url.hostname).toBe("127.0.0.1");
      const token = url.searchParams.get("token");
      expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
      await waitFor(() => /warning: the UI listens beyond loopback/.test(stderr));
      expect(stderr.split("\n").filter((line) => line.includes("warning"))).toHaveLength(1);
      // Every other address it printed carries the same token.
      for (const line of stdout.split("\n").filter((text) => text.includes(" also at "))) {
        expect(line).toMatch(new RegExp(`^agentloop ui: also at http://\\S+:${url.port}/\\?token=${token}$`));
      }

      const api = new URL("/api/sessions", `http://127.0.0.1:${url.port}`);
      const refused = await fetch(api);
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
      const control = await fetch(new URL("/api/control", api), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          agent: "assistant",
          session: "victim",
          command: "approve",
          toolCallId: "call_2",
        }),
      });
      expect(control.status).toBe(401);
      const allowed = await fetch(api, { headers: { authorization: `Bearer ${token}` } });
      expect(allowed.status).toBe(200);
      await waitFor(() => /refused GET \/api\/sessions .*\(rule: token\)/.test(stderr));
    } finally {
      running.child.kill("SIGTERM");
    }
    const run = await running.result;
    expect(run.code).toBe(0);
    expect(stackLines(run.stderr)).toEqual([]);
  });
});

describe("the UI flags", () => {
  it("read --ui-token, --ui-allowed-hosts and --ui-max-streams, flags over the environment", () => {
    expect(uiSettingsFrom({}, {})).toEqual({});
    expect(
      uiSettingsFrom(
        { "ui-token": "0123456789abcdef-_.~", "ui-allowed-hosts": "Agents.Example, proxy.example:8443" },
        { AGENTLOOP_UI_TOKEN: "fromtheenvironment12", AGENTLOOP_UI_MAX_STREAMS: "64" },
      ),
    ).toEqual({
      token: "0123456789abcdef-_.~",
      allowedHosts: ["agents.example", "proxy.example:8443"],
      maxStreams: 64,
    });
    expect(uiSettingsFrom({}, { AGENTLOOP_UI_TOKEN: "fromtheenvironment12" }).token).toBe(
      "fromtheenvironment12",
    );
  });

  it("refuse what they cannot take, naming the flag", () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ "ui-token": "short" }, /^--ui-token must be 16 to 512 characters/],
      [{ "ui-token": "has spaces in it, sixteen+" }, /^--ui-token/],
      [{ "ui-allowed-hosts": "ok.example,,x" }, /^--ui-allowed-hosts takes host names .*got ""/],
      [{ "ui-allowed-hosts": "http://x.example" }, /^--ui-allowed-hosts .*got "http:\/\/x\.example"/],
      [{ "ui-max-streams": "0" }, /^--ui-max-streams must be a whole number from 1 to 100000, got "0"/],
      [{ "ui-max-streams": "lots" }, /^--ui-max-streams/],
    ];
    for (const [flags, message] of cases) {
      let thrown: unknown;
      try {
        uiSettingsFrom(flags, {});
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(UsageError);
      expect((thrown as Error).message).toMatch(message);
    }
  });

  it("are a one-line usage error from the CLI, before anything starts", async () => {
    for (const command of ["ui", "up"]) {
      const run = await runCli([command, "--ui-max-streams", "none", "--nats", "nats://127.0.0.1:1"]);
      expect({ command, code: run.code, stderr: run.stderr }).toEqual({
        command,
        code: 2,
        stderr: 'agentloop: --ui-max-streams must be a whole number from 1 to 100000, got "none"\n',
      });
    }
  });
});

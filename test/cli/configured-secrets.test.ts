import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  configuredSecrets,
  resolveRuntimeConfig,
  secretRedactorFor,
} from "../../src/config/runtime-config.js";

/** Which secrets a process hides from tool results, events and error lines. */

let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "agentloop-secrets-"));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

const SEED = "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PV6TXJXQUN5YQ";

describe("configuredSecrets", () => {
  it("collects both providers' keys, the NATS password and the seed of the credentials file", async () => {
    const creds = join(directory, "user.creds");
    await writeFile(
      creds,
      [
        "-----BEGIN NATS USER JWT-----",
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.sig",
        "------END NATS USER JWT------",
        "",
        "-----BEGIN USER NKEY SEED-----",
        SEED,
        "------END USER NKEY SEED------",
        "",
      ].join("\n"),
    );
    const env = {
      ANTHROPIC_API_KEY: "sk-ant-first-key",
      OPENAI_API_KEY: "sk-openai-second",
      NATS_URL: "nats://agent:pa55word-long@127.0.0.1:4222",
      NATS_CREDS: creds,
    };
    const config = resolveRuntimeConfig({}, env);
    expect(configuredSecrets(config, env).sort()).toEqual(
      ["sk-ant-first-key", "sk-openai-second", "pa55word-long", SEED].sort(),
    );
  });

  it("takes a token from the NATS URL, and ignores a missing credentials file", () => {
    const env = { NATS_URL: "nats://s3cr3t-token-value@127.0.0.1:4222", NATS_CREDS: join(directory, "none") };
    expect(configuredSecrets(resolveRuntimeConfig({}, env), env)).toEqual(["s3cr3t-token-value"]);
  });

  it("builds a redactor that costs nothing when there is no secret", () => {
    const config = resolveRuntimeConfig({}, {});
    expect(secretRedactorFor(config, {}).isActive).toBe(false);
    const withKey = { OPENAI_API_KEY: "sk-openai-second" };
    expect(secretRedactorFor(resolveRuntimeConfig({}, withKey), withKey).redact("k=sk-openai-second")).toBe(
      "k=[redacted]",
    );
  });
});

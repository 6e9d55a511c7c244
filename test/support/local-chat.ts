import { afterEach } from "vitest";
import {
  type CliRun,
  type FakeProvider,
  type HostedProvider,
  type ProviderReply,
  runCli,
  startFakeProvider,
} from "./cli.js";

/** One `agentloop chat --local` run and the model requests it made. */
export interface LocalChatRun {
  run: CliRun;
  /** The requests' parsed bodies, in order. */
  bodies: Record<string, unknown>[];
}

/** Runs the built CLI's `chat --local` against a fresh fake of `provider` answering with `script`. */
export type LocalChat = (
  provider: HostedProvider,
  script: readonly ProviderReply[],
  args: readonly string[],
  env?: Record<string, string>,
) => Promise<LocalChatRun>;

/**
 * The `chat()` the CLI's provider tests share (tool loops, tool errors, faults, compaction): each
 * call starts a fake provider with its own script (closing the one before), runs
 * `agentloop chat --local --provider P --base-url URL ARGS` with the provider's dummy key plus
 * `env`, and the last fake is closed after each test. Call it at the top of a test file.
 */
export function useLocalChat(): LocalChat {
  let fake: FakeProvider | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });
  return async (provider, script, args, env = {}) => {
    await fake?.close();
    fake = await startFakeProvider(provider, script);
    const run = await runCli(["chat", "--local", ...fake.flags, ...args], { env: { ...fake.env, ...env } });
    return { run, bodies: fake.bodies() };
  };
}

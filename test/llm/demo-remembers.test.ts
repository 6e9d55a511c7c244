import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDemoReply } from "../../src/llm/demo/demo-reply.js";
import type { LlmOptions, Message } from "../../src/llm/types.js";
import { runCli } from "../support/cli.js";

/** The demo model shows that a session remembers: it quotes an earlier message of the session. */

let directory: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "agentloop-demo-remembers-"));
});

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

const OPTIONS: LlmOptions = { model: "demo" };
const user = (content: string): Message => ({ role: "user", content });
const assistant = (content: string): Message => ({ role: "assistant", content });

describe("the demo model remembers", () => {
  it("quotes the first message, or the previous one, of the conversation it was sent", () => {
    const conversation = [
      user("my name is Ada"),
      assistant("[demo] hello"),
      user("I like <b>tea</b>"),
      assistant("[demo] noted"),
    ];
    expect(createDemoReply([...conversation, user("what did I say first?")], OPTIONS).text).toBe(
      '[demo] Your first message in this session was: "my name is Ada" (1 of the 2 messages you sent before this one).',
    );
    expect(createDemoReply([...conversation, user("What was my last message?")], OPTIONS).text).toBe(
      '[demo] Your previous message was: "I like <b>tea</b>" (2 of the 2 messages you sent before this one).',
    );
    expect(createDemoReply([user("what did I say first?")], OPTIONS).text).toBe(
      "[demo] This is the first message of this session: there is nothing earlier to quote.",
    );
  });

  it(
    "across two processes' worth of runs on one database (chat --local --db)",
    { timeout: 30_000 },
    async () => {
      const db = join(directory, "history.db");
      const chat = (text: string) => runCli(["chat", "--local", "--db", db, "--session", "mem", text]);
      expect((await chat("my favourite colour is green")).code).toBe(0);
      expect((await chat("and I live in Lisbon")).code).toBe(0);
      const recalled = await chat("what did I say first?");
      expect(recalled.code).toBe(0);
      expect(recalled.stdout).toContain(
        'Your first message in this session was: "my favourite colour is green"',
      );
    },
  );
});

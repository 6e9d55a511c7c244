import { defineConfig } from "vitest/config";

// No provider key reaches the tests: the desk then runs on its scripted models, as it does for a
// newcomer without one, and no test can call a real provider.
export default defineConfig({
  test: {
    include: ["test/**/*.test.js"],
    testTimeout: 60_000,
    env: { ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "" },
  },
});

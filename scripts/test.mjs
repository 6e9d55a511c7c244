// `npm test`: the checks, then every test suite. Lint, typecheck and the emit build do not depend on
// each other, so they run at the same time (typecheck, the longest, sets the pace), each with its
// output held back and printed under its name once it ends, so two failures never interleave. Only
// when all three passed does vitest run (tests that spawn `dist/` need the fresh build), with the
// terminal to itself. Extra arguments go to vitest: `npm test -- test/cli`.
import { spawn } from "node:child_process";

const checks = [
  ["lint", ["run", "lint"]],
  ["typecheck", ["run", "typecheck"]],
  ["build:emit", ["run", "build:emit"]],
];

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** Runs one command with its output collected; resolves with its exit status and output. */
function runQuietly(label, args) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(npm, ["--silent", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    const chunks = [];
    child.stdout.on("data", (chunk) => chunks.push(chunk));
    child.stderr.on("data", (chunk) => chunks.push(chunk));
    child.on("error", (error) => chunks.push(Buffer.from(`cannot start npm: ${error.message}\n`)));
    child.on("close", (code, signal) => {
      const status = code ?? (signal === null ? 1 : 128);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      resolve({ label, status, signal, seconds, output: Buffer.concat(chunks).toString("utf8") });
    });
  });
}

const results = await Promise.all(checks.map(([label, args]) => runQuietly(label, args)));
let failed = false;
for (const result of results) {
  const ended = result.signal === null ? `exit ${result.status}` : `killed by ${result.signal}`;
  if (result.status === 0) {
    console.log(`✓ ${result.label} (${result.seconds} s)`);
    continue;
  }
  failed = true;
  console.error(`\n✗ ${result.label} failed (${ended}, ${result.seconds} s):\n`);
  process.stderr.write(result.output.endsWith("\n") ? result.output : `${result.output}\n`);
}
if (failed) {
  const names = results.filter((result) => result.status !== 0).map((result) => result.label);
  console.error(`\nnpm test stopped before the tests: ${names.join(", ")} failed`);
  process.exitCode = 1;
} else {
  const vitest = spawn(
    process.execPath,
    ["node_modules/vitest/vitest.mjs", "run", ...process.argv.slice(2)],
    {
      stdio: "inherit",
    },
  );
  // Ctrl-C reaches vitest through the terminal's process group: wait for its teardown (which stops
  // the nats-servers) and end with its status.
  process.on("SIGINT", () => {});
  vitest.on("close", (code, signal) => {
    process.exitCode = code ?? (signal === null ? 1 : 128);
    process.exit();
  });
}

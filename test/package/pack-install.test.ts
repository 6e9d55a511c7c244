import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertFreshBuild } from "../support/fresh-build.js";

/**
 * The published package as a user gets it: `npm pack`, installed from the tarball into a fresh
 * project, then a small program type-checked against the installed `.d.ts` and run. Needs a fresh
 * `npm run build` (`npm test` builds first). Installing skips install scripts: the program keeps
 * its histories in memory, so better-sqlite3's native build is never loaded.
 */

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");

let directory: string;
let project: string;
let tarball: string;
let packedFiles: string[];

beforeAll(async () => {
  // The tarball packs dist/: old code would be checked.
  assertFreshBuild();
  directory = await mkdtemp(join(tmpdir(), "agentloop-pack-"));
  const { stdout } = await run(
    "npm",
    ["pack", "--ignore-scripts", "--json", "--pack-destination", directory],
    { cwd: ROOT },
  );
  const [packed] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  if (packed === undefined) throw new Error(`npm pack said nothing: ${stdout}`);
  tarball = join(directory, packed.filename);
  packedFiles = packed.files.map((file) => file.path);
  project = join(directory, "consumer");
  await run("mkdir", [project]);
  await writeFile(
    join(project, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", private: true, type: "module" }),
  );
  // The dependencies come from npm's cache (filled by the project's own install) when it has them.
  await run(
    "npm",
    [
      "install",
      "--ignore-scripts",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      "--loglevel=error",
      tarball,
    ],
    { cwd: project, timeout: 150_000 },
  );
}, 180_000);

afterAll(async () => {
  if (directory !== undefined) await rm(directory, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("holds the compiled code, its declarations and the UI page, and no tests", () => {
    expect(packedFiles).toEqual(
      expect.arrayContaining([
        "package.json",
        "README.md",
        "dist/src/index.js",
        "dist/src/index.d.ts",
        "dist/src/public/errors.js",
        "dist/src/public/errors.d.ts",
        "dist/src/public/bus.js",
        "dist/src/public/bus.d.ts",
        "dist/src/public/events.js",
        "dist/src/public/events.d.ts",
        "dist/src/public/models.js",
        "dist/src/public/models.d.ts",
        "dist/src/testing/index.js",
        "dist/src/testing/index.d.ts",
        "dist/src/cli/bin.js",
        "dist/src/ui/public/index.html",
      ]),
    );
    expect(
      packedFiles.filter((path) => /(^|\/)(test|bench)\//.test(path) || path.startsWith("src/")),
    ).toEqual([]);
  });

  it("type-checks and runs a program against the installed package", async () => {
    await copyFile(new URL("./consumer-program.ts.txt", import.meta.url), join(project, "main.ts"));
    await writeFile(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          outDir: "out",
          // The consumer's own Node types (our declarations use them, as any Node library's do).
          typeRoots: [join(ROOT, "node_modules/@types")],
          types: ["node"],
          skipLibCheck: true,
        },
        files: ["main.ts"],
      }),
    );
    // Type errors fail here, with tsc's output in the message.
    await run(process.execPath, [TSC, "-p", "tsconfig.json"], { cwd: project }).catch((error) => {
      throw new Error(`tsc failed:\n${error.stdout}${error.stderr}`);
    });
    const { stdout, stderr } = await run(process.execPath, ["out/main.js"], {
      cwd: project,
      timeout: 30_000,
    });
    expect(stderr).toBe("");
    const output = JSON.parse(stdout);
    const manifest = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8"));
    expect(output).toEqual({
      version: manifest.version,
      direct: "5",
      reply: expect.objectContaining({ ok: true, session: "s1", result: "40 + 2 = 42" }),
      control: { ok: true },
      calls: [
        { a: 2, b: 3 },
        { a: 40, b: 2 },
      ],
      toolResults: ["42"],
      eventCount: expect.any(Number),
      unparsed: 0,
      errorEntries: {
        mainHasChatFailedError: true,
        mainHasRateLimitError: false,
        errorsHasRateLimitError: true,
      },
      refused: expect.stringMatching(/^startHost: agents\[0\]\.tools\[0\]: unknown tool set "no_such_tool"/),
      refusedReply: "internal",
    });
    expect(output.eventCount).toBeGreaterThan(0);
  });

  it("type-checks every @example written against the package, as a program of its own", async () => {
    const examples = await collectPackageExamples(join(ROOT, "src"));
    // The public factories each show one: a missing one (or a broken extraction) fails here.
    expect(new Set(examples.map((example) => example.file))).toEqual(
      new Set([
        "agent/create-agent.ts",
        "bus/nats-bus.ts",
        "config/agent-config.ts",
        "errors/describe-error.ts",
        "events/parse-event.ts",
        "host/start-host.ts",
        "index.ts",
        "llm/create-backend.ts",
        "public/bus.ts",
        "public/errors.ts",
        "public/events.ts",
        "public/models.ts",
        "testing/explore-agent-paths.ts",
        "testing/fake-provider.ts",
        "testing/scripted-model.ts",
        "tools/create-tool-set.ts",
        "tools/define-tool.ts",
      ]),
    );
    const folder = join(project, "examples");
    await mkdir(folder, { recursive: true });
    const names = await Promise.all(
      examples.map(async (example, index) => {
        const name = `example-${index}.ts`;
        await writeFile(join(folder, name), `// ${example.file}\n${example.code}\n`);
        return name;
      }),
    );
    await writeFile(
      join(folder, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          typeRoots: [join(ROOT, "node_modules/@types")],
          types: ["node"],
          skipLibCheck: true,
        },
        files: names,
      }),
    );
    await run(process.execPath, [TSC, "-p", "tsconfig.json"], { cwd: folder }).catch((error) => {
      throw new Error(`an @example does not compile:\n${error.stdout}${error.stderr}`);
    });
  }, 60_000);

  it("installs the agentloop command, which prints the package's version", async () => {
    const manifest = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8"));
    const { stdout } = await run(join(project, "node_modules/.bin/agentloop"), ["--version"]);
    expect(stdout).toBe(`agentloop ${manifest.version}\n`);
  });
});

/** A TSDoc `@example` code block that imports the package, and the file under src/ it is in. */
interface PackageExample {
  file: string;
  code: string;
}

/** Every `@example` block under `directory` whose code imports `agentloop` or one of its entries. */
async function collectPackageExamples(directory: string): Promise<PackageExample[]> {
  const entries = await readdir(directory, { recursive: true });
  const examples: PackageExample[] = [];
  for (const entry of entries.filter((path) => path.endsWith(".ts")).sort()) {
    const text = await readFile(join(directory, entry), "utf8");
    for (const match of text.matchAll(/@example\s*\n\s*\* ```(?:ts|js)\n([\s\S]*?)\n\s*\* ```/g)) {
      const code = (match[1] ?? "")
        .split("\n")
        .map((line) => line.replace(/^\s*\*( |$)/, ""))
        .join("\n");
      if (/from "agentloop(\/[a-z]+)?"/.test(code)) examples.push({ file: entry, code });
    }
  }
  return examples;
}

import { execFile } from "node:child_process";
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertFreshBuild } from "../support/fresh-build.js";

/**
 * The published package as a user gets it: `npm pack`, installed from the tarball into a fresh
 * project, then a small program and every `@example` type-checked against the installed `.d.ts`
 * (one tsc run) and the program run. Needs a fresh `npm run build` (`npm test` builds first).
 *
 * Installing does what `npm install <tarball>` does for this package, without copying the ~100 MB
 * of dependencies out of npm's cache (that took half a minute per run): the tarball is unpacked
 * into `node_modules/agentloop`, each dependency the packed package.json declares is linked from
 * this repository's own install (at the pinned version), and its `bin` entries are linked into
 * `node_modules/.bin`. A dependency it uses but does not declare is missing there, as it would be
 * for a user. Install scripts never run: the program keeps its histories in memory, so
 * better-sqlite3's native build is never loaded.
 */

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");

let directory: string;
let project: string;
let packedFiles: string[];
let examples: PackageExample[];
/** What the one tsc run over the program and the examples printed ("" when it passed). */
let compilerOutput: string;

/** The files under src/ that hold a package `@example`: every public factory shows one. */
const EXAMPLE_FILES = [
  "agent/create-agent.ts",
  "bus/local-bus.ts",
  "bus/nats-bus.ts",
  "bus/subjects.ts",
  "config/agent-config.ts",
  "context/in-memory-history.ts",
  "context/nats-history-store.ts",
  "errors/agentloop-error.ts",
  "errors/describe-error.ts",
  "errors/error-code.ts",
  "errors/error-info.ts",
  "events/parse-event.ts",
  "host/start-host.ts",
  "index.ts",
  "llm/create-backend.ts",
  "llm/retrying-client.ts",
  "public/bus.ts",
  "public/errors.ts",
  "public/events.ts",
  "public/models.ts",
  "testing/explore-agent-paths.ts",
  "testing/fake-provider.ts",
  "testing/scripted-model.ts",
  "tools/create-tool-set.ts",
  "tools/define-tool.ts",
];

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
  packedFiles = packed.files.map((file) => file.path);
  project = join(directory, "consumer");
  await mkdir(project);
  await writeFile(
    join(project, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", private: true, type: "module" }),
  );
  await installTarball(join(directory, packed.filename), project);

  // The program and the examples, type-checked together: tsc's start-up is most of its time.
  await copyFile(new URL("./consumer-program.ts.txt", import.meta.url), join(project, "main.ts"));
  examples = await collectPackageExamples(join(ROOT, "src"));
  await mkdir(join(project, "examples"));
  const exampleFiles = await Promise.all(
    examples.map(async (example, index) => {
      const name = `examples/example-${index}.ts`;
      await writeFile(join(project, name), `// ${example.file}\n${example.code}\n`);
      return name;
    }),
  );
  await writeFile(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        outDir: "out",
        rootDir: ".",
        // The consumer's own Node types (our declarations use them, as any Node library's do).
        typeRoots: [join(ROOT, "node_modules/@types")],
        types: ["node"],
        skipLibCheck: true,
      },
      files: ["main.ts", ...exampleFiles],
    }),
  );
  compilerOutput = await run(process.execPath, [TSC, "-p", "tsconfig.json", "--pretty", "false"], {
    cwd: project,
  }).then(
    () => "",
    (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
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
    // Type errors fail here, with tsc's output in the message.
    expect(compilerErrorsOf("main.ts"), "tsc failed on main.ts").toEqual([]);
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

  it("type-checks every @example written against the package, as a program of its own", () => {
    // The public factories each show one: a missing one (or a broken extraction) fails here.
    expect(new Set(examples.map((example) => example.file))).toEqual(new Set(EXAMPLE_FILES));
    expect(compilerErrorsOf("examples/"), "an @example does not compile").toEqual([]);
    // Nothing tsc said is left unaccounted for.
    expect(
      compilerOutput.split("\n").filter((line) => line.trim() !== "" && !/^(main\.ts|examples\/)/.test(line)),
    ).toEqual([]);
  });

  it("installs the agentloop command, which prints the package's version", async () => {
    const manifest = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8"));
    const { stdout } = await run(join(project, "node_modules/.bin/agentloop"), ["--version"]);
    expect(stdout).toBe(`agentloop ${manifest.version}\n`);
  });
});

/** tsc's error lines about `path` (a file, or a folder ending in `/`), with the lines that continue them. */
function compilerErrorsOf(path: string): string[] {
  const errors: string[] = [];
  let isOurs = false;
  for (const line of compilerOutput.split("\n")) {
    if (/^\S.*\(\d+,\d+\): error /.test(line)) isOurs = line.startsWith(path);
    if (isOurs && line.trim() !== "") errors.push(line);
  }
  return errors;
}

/**
 * Installs a packed tarball into `project` as npm would: unpacked into `node_modules/<name>`,
 * each declared dependency linked from this repository's install (which must hold the pinned
 * version), each `bin` entry linked into `node_modules/.bin` and made executable.
 */
async function installTarball(tarball: string, project: string): Promise<void> {
  const modules = join(project, "node_modules");
  const manifest = JSON.parse(
    (await run("tar", ["-xzOf", tarball, "package/package.json"], { maxBuffer: 1 << 20 })).stdout,
  ) as { name: string; bin?: Record<string, string>; dependencies?: Record<string, string> };
  const target = join(modules, manifest.name);
  await mkdir(target, { recursive: true });
  await run("tar", ["-xzf", tarball, "-C", target, "--strip-components=1"]);
  for (const [dependency, pinned] of Object.entries(manifest.dependencies ?? {})) {
    const installed = join(ROOT, "node_modules", dependency);
    const { version } = JSON.parse(await readFile(join(installed, "package.json"), "utf8")) as {
      version: string;
    };
    if (version !== pinned) {
      throw new Error(`${dependency}: the package pins ${pinned}, this repository has ${version} (npm ci)`);
    }
    await mkdir(dirname(join(modules, dependency)), { recursive: true });
    await symlink(installed, join(modules, dependency), "dir");
  }
  await mkdir(join(modules, ".bin"), { recursive: true });
  for (const [command, path] of Object.entries(manifest.bin ?? {})) {
    await chmod(join(target, path), 0o755);
    await symlink(join("..", manifest.name, path), join(modules, ".bin", command));
  }
}

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

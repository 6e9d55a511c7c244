import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { linesOf, runCli, stackLines } from "../support/cli.js";

/**
 * A config file's mistakes told so they can be fixed: a syntax error with its line and column, and
 * a TypeScript config either loaded through tsx (when the project has it) or refused with a hint.
 */

let directory: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "agentloop-config-errors-"));
});

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe("config file errors", () => {
  it("a syntax error names its line and column", async () => {
    const path = join(directory, "broken.config.mjs");
    await writeFile(path, 'export default {\n  agents: [\n    { name: "a" }\n  ]]\n};\n');
    const run = await runCli(["serve", "--config", path]);
    expect(run).toMatchObject({ code: 2, stdout: "" });
    expect(linesOf(run.stderr)).toEqual([
      `agentloop: config file ${path}: cannot be loaded: Unexpected token ']' (line 4, column 4)`,
    ]);
  });

  it("a .ts config without tsx installed is refused in one line with the hint", async () => {
    const path = join(directory, "agentloop.config.ts");
    await writeFile(
      path,
      'const agents: { name: string }[] = [{ name: "a" }];\nexport default { agents };\n',
    );
    const run = await runCli(["up", "--config", path]);
    expect(run).toMatchObject({ code: 2, stdout: "" });
    expect(linesOf(run.stderr)).toEqual([
      `agentloop: config file ${path}: is TypeScript, which needs tsx to load: install it (npm install --save-dev tsx) or compile the file to .js`,
    ]);
    expect(stackLines(run.stderr)).toEqual([]);
  });

  it("a .ts config is handed to the project's tsx when it has one", async () => {
    // A project with a package named tsx: agentloop asks its esm API to import the file.
    const project = join(directory, "with-tsx");
    const api = join(project, "node_modules/tsx/esm");
    await mkdir(api, { recursive: true });
    await writeFile(
      join(project, "node_modules/tsx/package.json"),
      JSON.stringify({ name: "tsx", version: "4.0.0", exports: { "./esm/api": "./esm/api.mjs" } }),
    );
    // Stands in for tsx's transform: the config below is plain JavaScript after its type annotation.
    await writeFile(
      join(api, "api.mjs"),
      [
        'import { readFile, writeFile } from "node:fs/promises";',
        'import { fileURLToPath } from "node:url";',
        "export async function tsImport(specifier) {",
        "  const path = fileURLToPath(specifier);",
        '  const js = (await readFile(path, "utf8")).replace(": { name: string }[]", "");',
        '  await writeFile(path + ".mjs", js);',
        '  return import(specifier + ".mjs");',
        "}",
      ].join("\n"),
    );
    const path = join(project, "agentloop.config.ts");
    await writeFile(
      path,
      'const agents: { name: string }[] = [{ name: "a.b" }];\nexport default { agents };\n',
    );
    const run = await runCli(["serve", "--config", path]);
    // Loaded: what is left is the configuration's own mistake, named by its field.
    expect(run).toMatchObject({ code: 2, stdout: "" });
    expect(linesOf(run.stderr)).toEqual([
      expect.stringMatching(/config file .*agentloop\.config\.ts: agents\[0\]\.name: must match/),
    ]);
  });
});

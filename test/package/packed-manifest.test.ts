import { execFile } from "node:child_process";
import { copyFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The packed package.json carries no `prepare` script (npm warns about every install script of a
 * dependency, and an installed agentloop has nothing to build): `npm pack` runs `prepack`, which
 * writes the manifest without it, and `postpack`, which puts the repository's back. Checked on a
 * copy of the manifest, so the repository's own is never touched by a test.
 */

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SCRIPT = join(ROOT, "scripts/pack-manifest.mjs");

let directory: string;
let original: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "agentloop-manifest-"));
  await copyFile(join(ROOT, "package.json"), join(directory, "package.json"));
  original = await readFile(join(directory, "package.json"), "utf8");
});

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe("the packed manifest", () => {
  it("npm pack's own scripts strip prepare and restore it", () => {
    const scripts = (JSON.parse(original) as { scripts: Record<string, string> }).scripts;
    expect(scripts.prepare).toBe("npm run build");
    expect(scripts.prepack).toBe("npm run build && node scripts/pack-manifest.mjs strip");
    expect(scripts.postpack).toBe("node scripts/pack-manifest.mjs restore");
  });

  it("strip writes it without prepare (and nothing else changed); restore puts it back as it was", async () => {
    await run(process.execPath, [SCRIPT, "strip", directory]);
    const stripped = JSON.parse(await readFile(join(directory, "package.json"), "utf8")) as Record<
      string,
      unknown
    >;
    const expected = JSON.parse(original) as { scripts: Record<string, string> };
    delete expected.scripts.prepare;
    expect(stripped).toEqual(expected);
    // A second strip (a pack that failed before its postpack) starts from the kept original.
    await run(process.execPath, [SCRIPT, "strip", directory]);
    await run(process.execPath, [SCRIPT, "restore", directory]);
    expect(await readFile(join(directory, "package.json"), "utf8")).toBe(original);
  });
});

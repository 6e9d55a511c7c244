import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (this file is test/support/fresh-build.ts). */
export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The folders `npm run build` compiles that the built binary runs. */
const SOURCE_FOLDERS = ["src", "machines", "actors"];
/** Copied as they are by scripts/post-build.mjs. */
const ASSET_FOLDER = join("src", "ui", "public");

let verdict: { problem: string | undefined } | undefined;

/**
 * Throws a one-line error naming the fix when `dist/` is missing or older than a source file, so a
 * test that spawns `node dist/...` fails at once instead of testing old code (or timing out on a
 * missing file). Each compiled file is compared with its own source: `foo.ts` with `dist/foo.js`,
 * a UI asset with its copy. Checked once per test process.
 */
export function assertFreshBuild(): void {
  verdict ??= { problem: findStaleOutput() };
  if (verdict.problem !== undefined) throw new Error(verdict.problem);
}

function findStaleOutput(): string | undefined {
  const fix = "run `npm run build` (`npm test` builds before the tests)";
  if (modifiedAt(join(REPO_ROOT, "dist", "src", "cli", "bin.js")) === undefined) {
    return `dist/ is missing (no dist/src/cli/bin.js): ${fix}`;
  }
  for (const folder of SOURCE_FOLDERS) {
    const entries = readdirSync(join(REPO_ROOT, folder), { recursive: true, withFileTypes: true });
    for (const entry of entries) {
      if (!entry.isFile()) continue;
      const source = relative(REPO_ROOT, join(entry.parentPath, entry.name));
      const output = outputOf(source);
      if (output === undefined) continue;
      const built = modifiedAt(join(REPO_ROOT, output));
      if (built === undefined) return `dist/ is stale: ${output} is missing (from ${source}): ${fix}`;
      if (modifiedAt(join(REPO_ROOT, source))! > built) {
        return `dist/ is stale: ${source} is newer than ${output}: ${fix}`;
      }
    }
  }
  return undefined;
}

/** Where the build puts what it makes of `source`, or undefined for a file it does not build. */
function outputOf(source: string): string | undefined {
  if (source.startsWith(`${ASSET_FOLDER}/`)) return join("dist", source);
  if (source.endsWith(".d.ts") || !source.endsWith(".ts")) return undefined;
  return join("dist", `${source.slice(0, -".ts".length)}.js`);
}

function modifiedAt(path: string): number | undefined {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

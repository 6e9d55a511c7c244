import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * better-sqlite3 12 handles must never become garbage: on Node 24 the GC that finalises a Database
 * or Statement outside a JavaScript context (a collection run from a V8 task) aborts the process
 * with `Assertion failed: (env) != nullptr` (see src/context/sqlite-statements.ts). A test that drops
 * one kills its vitest worker, which runs other files after it (`isolate: false`), with SIGABRT in
 * the middle of whatever file runs next: "Worker exited unexpectedly". So every handle goes through
 * `pinDatabase` (or `openAgentDatabase`, which pins), and every statement through `statement()`.
 */
const ROOT = join(import.meta.dirname, "..", "..");
const FOLDERS = ["src", "machines", "actors", "test"];

/** A database handle made without `pinDatabase(` right around it. */
const UNPINNED_DATABASE = /(?<!pinDatabase\()new Database\(/g;

/** Handles made where their isolate ends with them: a worker thread's code, run by `eval`. */
const ALLOWED = [{ file: "test/context/sqlite-context-history.test.ts", text: "new Database(workerData)" }];

function sourceFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
}

/** `file:line: text` for every handle in `file` that nothing keeps referenced. */
function unpinnedHandles(file: string): string[] {
  const source = readFileSync(join(ROOT, file), "utf8");
  // This file names the patterns it looks for.
  if (file === relative(ROOT, import.meta.filename)) return [];
  const usesSqlite = /from "better-sqlite3"|sqlite-statements\.js"|agent-database\.js"/.test(source);
  if (!usesSqlite) return [];
  const found: string[] = [];
  source.split("\n").forEach((line, index) => {
    const problems = [
      ...line.matchAll(UNPINNED_DATABASE),
      ...(file.endsWith("sqlite-statements.ts") ? [] : line.matchAll(/\.(prepare|pragma|iterate)\(/g)),
    ];
    for (const _ of problems) {
      if (ALLOWED.some((allowed) => allowed.file === file && line.includes(allowed.text))) continue;
      found.push(`${file}:${index + 1}: ${line.trim()}`);
    }
  });
  return found;
}

describe("better-sqlite3 handles", () => {
  it("are pinned wherever they are made: a dropped one aborts a Node 24 process when the GC finds it", () => {
    const files = FOLDERS.flatMap(sourceFiles);
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap(unpinnedHandles)).toEqual([]);
  });

  it("the check finds a handle made without a pin", () => {
    expect("const holder = track(new Database(path));".match(UNPINNED_DATABASE)).toHaveLength(1);
    expect("const holder = track(pinDatabase(new Database(path)));".match(UNPINNED_DATABASE)).toBeNull();
  });
});

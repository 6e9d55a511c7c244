// Reports import cycles in the library code and fails when there are more than the house allows.
//
// The graph is built from the relative imports (type-only imports and `export … from` included) of
// every TypeScript file under src/, machines/ and actors/; tests, benches and examples are left out.
// A "file cycle" is a group of files that reach each other through imports (a strongly connected
// component of more than one file). A "folder pair" is two folders (the first level under src/,
// plus machines/ and actors/) whose files import each other in both directions.
//
// Usage: node scripts/check-imports.mjs [--verbose]
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

/** The most file cycles allowed: none, so any new one fails the lint. */
const maxFileCycles = 0;
/** The most pairs of folders allowed to import each other. */
const maxFolderPairs = 3;

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
const roots = ["src", "machines", "actors"];
const isVerbose = process.argv.includes("--verbose");

function listSourceFiles(directory) {
  const files = [];
  for (const entry of readdirSync(directory)) {
    const path = join(directory, entry);
    if (statSync(path).isDirectory()) files.push(...listSourceFiles(path));
    else if (/\.(ts|mts)$/.test(entry) && !entry.endsWith(".d.ts")) files.push(path);
  }
  return files;
}

/** The file a relative specifier names: `./x.js` is written for `./x.ts`. */
function resolveSpecifier(fromFile, specifier, known) {
  const base = resolve(dirname(fromFile), specifier);
  const candidates = [
    base.replace(/\.js$/, ".ts"),
    base.replace(/\.mjs$/, ".mts"),
    base,
    `${base}.ts`,
    join(base, "index.ts"),
  ];
  return candidates.find((candidate) => known.has(candidate));
}

/**
 * The folder a file belongs to for the folder-pair count: `src/bus/x.ts` → `bus`. A file directly
 * in src/ (the package entry, the version) stands alone: it is not a folder of code.
 */
function folderOf(file) {
  const parts = relative(root, file).split("/");
  if (parts[0] === "src") return parts[1];
  return parts[0];
}

const files = roots.flatMap((folder) => listSourceFiles(join(root, folder)));
const known = new Set(files);
/** @type {Map<string, Set<string>>} */
const edges = new Map();
for (const file of files) {
  const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  const targets = new Set();
  for (const imported of info.importedFiles) {
    if (!imported.fileName.startsWith(".")) continue;
    const target = resolveSpecifier(file, imported.fileName, known);
    if (target !== undefined && target !== file) targets.add(target);
  }
  edges.set(file, targets);
}

/** Tarjan's strongly connected components, iterative so deep graphs do not overflow the stack. */
function findCycles() {
  let nextIndex = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  for (const start of files) {
    if (index.has(start)) continue;
    const work = [{ node: start, targets: [...edges.get(start)], next: 0 }];
    index.set(start, nextIndex);
    low.set(start, nextIndex++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      if (frame.next < frame.targets.length) {
        const target = frame.targets[frame.next++];
        if (!index.has(target)) {
          index.set(target, nextIndex);
          low.set(target, nextIndex++);
          stack.push(target);
          onStack.add(target);
          work.push({ node: target, targets: [...edges.get(target)], next: 0 });
        } else if (onStack.has(target)) {
          low.set(frame.node, Math.min(low.get(frame.node), index.get(target)));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined) low.set(parent.node, Math.min(low.get(parent.node), low.get(frame.node)));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component = [];
        let member;
        do {
          member = stack.pop();
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1) components.push(component.map((file) => relative(root, file)).sort());
      }
    }
  }
  return components;
}

function findFolderPairs() {
  /** @type {Map<string, Map<string, string[]>>} */
  const folderEdges = new Map();
  for (const [file, targets] of edges) {
    for (const target of targets) {
      const from = folderOf(file);
      const to = folderOf(target);
      if (from === to) continue;
      if (!folderEdges.has(from)) folderEdges.set(from, new Map());
      const byTarget = folderEdges.get(from);
      if (!byTarget.has(to)) byTarget.set(to, []);
      byTarget.get(to).push(`${relative(root, file)} → ${relative(root, target)}`);
    }
  }
  const pairs = [];
  for (const [from, byTarget] of folderEdges) {
    for (const [to, forward] of byTarget) {
      const backward = folderEdges.get(to)?.get(from);
      if (backward !== undefined && from < to) pairs.push({ pair: `${from}↔${to}`, forward, backward });
    }
  }
  return pairs.sort((a, b) => a.pair.localeCompare(b.pair));
}

const cycles = findCycles();
const pairs = findFolderPairs();

console.log(`${files.length} files, ${cycles.length} file cycle(s), ${pairs.length} folder pair(s)`);
for (const cycle of cycles) console.log(`  cycle: ${cycle.join(", ")}`);
for (const { pair, forward, backward } of pairs) {
  console.log(`  folders: ${pair} (${forward.length} one way, ${backward.length} back)`);
  if (isVerbose) for (const line of [...forward, ...backward]) console.log(`    ${line}`);
}

const failures = [];
if (cycles.length > maxFileCycles) failures.push(`${cycles.length} file cycles (at most ${maxFileCycles})`);
if (pairs.length > maxFolderPairs) failures.push(`${pairs.length} folder pairs (at most ${maxFolderPairs})`);
if (failures.length > 0) {
  console.error(`check-imports: ${failures.join("; ")}`);
  process.exit(1);
}

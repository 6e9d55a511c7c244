import { existsSync, readFileSync, writeFileSync } from "node:fs";

export const BEGIN_MARKER = "<!-- bench:begin (written by npm run bench; edit outside the markers) -->";
export const END_MARKER = "<!-- bench:end -->";

/**
 * Writes the generated block into BENCHMARKS.md between the markers, keeping whatever is written
 * around them (the analysis of what limits each figure), so a re-run updates the numbers only.
 */
export function writeBenchmarksFile(path: string, generated: string): void {
  const block = `${BEGIN_MARKER}\n${generated.trim()}\n${END_MARKER}`;
  if (!existsSync(path)) {
    writeFileSync(path, `# Benchmarks\n\n${block}\n`);
    return;
  }
  const current = readFileSync(path, "utf8");
  const begin = current.indexOf(BEGIN_MARKER);
  const end = current.indexOf(END_MARKER);
  if (begin === -1 || end === -1 || end < begin) {
    writeFileSync(path, `${current.trimEnd()}\n\n${block}\n`);
    return;
  }
  writeFileSync(path, current.slice(0, begin) + block + current.slice(end + END_MARKER.length));
}

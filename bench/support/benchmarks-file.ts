import { existsSync, readFileSync, writeFileSync } from "node:fs";

export const BEGIN_MARKER = "<!-- bench:begin (written by npm run bench; edit outside the markers) -->";
export const END_MARKER = "<!-- bench:end -->";

/**
 * Writes the generated block into BENCHMARKS.md between the markers, keeping whatever is written
 * around them (the analysis of what limits each figure), so a re-run updates the numbers only.
 */
export function writeBenchmarksFile(
  path: string,
  generated: string,
  markers: { begin: string; end: string } = { begin: BEGIN_MARKER, end: END_MARKER },
): void {
  const block = `${markers.begin}\n${generated.trim()}\n${markers.end}`;
  if (!existsSync(path)) {
    writeFileSync(path, `# Benchmarks\n\n${block}\n`);
    return;
  }
  const current = readFileSync(path, "utf8");
  const begin = current.indexOf(markers.begin);
  const end = current.indexOf(markers.end);
  if (begin === -1 || end === -1 || end < begin) {
    writeFileSync(path, `${current.trimEnd()}\n\n${block}\n`);
    return;
  }
  writeFileSync(path, current.slice(0, begin) + block + current.slice(end + markers.end.length));
}

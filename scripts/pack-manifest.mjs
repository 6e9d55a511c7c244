// The packed package.json without the `prepare` script. In this repository `prepare` builds dist/
// right after `npm ci`; in an installed package it has nothing to do (dist/ is in the tarball), and
// npm warns about every install script a dependency carries. So `npm pack` / `npm publish` run
// `prepack` (`strip`: keep the manifest aside, write it without `prepare`) and then `postpack`
// (`restore`: put it back). A pack that failed in between is restored by the next `strip`.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

// The package's directory: this repository, or the one given after the mode (the tests use a copy).
const root = process.argv[3] ?? fileURLToPath(new URL("../", import.meta.url));
const manifestPath = join(root, "package.json");
const keptPath = join(root, ".package.json.packing");
const mode = process.argv[2];

if (mode === "strip") {
  if (existsSync(keptPath)) renameSync(keptPath, manifestPath);
  const text = readFileSync(manifestPath, "utf8");
  writeFileSync(keptPath, text);
  const manifest = JSON.parse(text);
  delete manifest.scripts.prepare;
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
} else if (mode === "restore") {
  if (existsSync(keptPath)) renameSync(keptPath, manifestPath);
} else {
  process.stderr.write("usage: node scripts/pack-manifest.mjs strip|restore [DIR]\n");
  process.exit(2);
}

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { InternalError } from "./errors/internal-error.js";

/**
 * This package's version, read from its `package.json` at run time so the CLI's `--version`, the
 * tracer's instrumentation scope and the published package can never disagree.
 */
export const VERSION: string = readPackageVersion();

/**
 * The version of the nearest `package.json` named `agentloop` above this module: `src/` when run
 * from source, `dist/src/` when built (the depth differs, hence the walk).
 */
function readPackageVersion(): string {
  let directory = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(join(directory, "package.json"), "utf8")) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === "agentloop" && typeof manifest.version === "string") return manifest.version;
    } catch {
      // No (readable) package.json here: look one level up.
    }
    const parent = dirname(directory);
    if (parent === directory) throw new InternalError("agentloop: cannot find its own package.json");
    directory = parent;
  }
}

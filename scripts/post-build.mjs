// Copies non-TypeScript assets (the UI page) next to the compiled code and marks the CLI executable.
import { chmodSync, cpSync, existsSync } from "node:fs";

const assets = [["src/ui/public", "dist/src/ui/public"]];
for (const [from, to] of assets) {
  if (existsSync(from)) cpSync(from, to, { recursive: true });
}
if (existsSync("dist/src/cli/bin.js")) chmodSync("dist/src/cli/bin.js", 0o755);

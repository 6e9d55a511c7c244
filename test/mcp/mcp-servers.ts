import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * Real MCP servers from the npm registry (devDependencies), run with this Node: the reference
 * "everything" server and the filesystem server.
 */
const require = createRequire(import.meta.url);

function serverEntry(pkg: string): string {
  return join(dirname(require.resolve(`${pkg}/package.json`)), "dist", "index.js");
}

export const EVERYTHING_SERVER = serverEntry("@modelcontextprotocol/server-everything");
export const FILESYSTEM_SERVER = serverEntry("@modelcontextprotocol/server-filesystem");

/** The "everything" server on stdio. */
export function everythingStdio(env?: Record<string, string>) {
  return { command: process.execPath, args: [EVERYTHING_SERVER, "stdio"], ...(env ? { env } : {}) };
}

/**
 * The "everything" server on stdio behind `/bin/sh`, which first records each start: when
 * `blockFile` exists it appends a line to `attemptsFile` and exits 1 (a server that cannot start);
 * otherwise it writes its pid to `pidFile` and execs the server (same pid), so a test can kill it
 * and check it is gone.
 */
export function everythingWithPidFile(files: { pidFile: string; blockFile: string; attemptsFile: string }) {
  const script = [
    `if [ -e '${files.blockFile}' ]; then echo failed >> '${files.attemptsFile}'; echo 'blocked by the test' >&2; exit 1; fi`,
    `echo $$ > '${files.pidFile}'`,
    `exec '${process.execPath}' '${EVERYTHING_SERVER}' stdio`,
  ].join("\n");
  return { command: "/bin/sh", args: ["-c", script] };
}

/** True while a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

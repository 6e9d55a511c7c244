import { execFile } from "node:child_process";
import { readlinkSync } from "node:fs";

/** Where `unshare` and `bwrap` are looked for: system tools, found without the host's environment. */
const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * A way to run a command in a PID namespace of its own with its own `/proc`: the command line is
 * `prefix` followed by the program and its arguments. Inside, the host's processes do not exist,
 * so `/proc/<host pid>/environ`, `/proc/1/environ` and `ps` show nothing of the host.
 */
export interface ShellIsolation {
  /** Named in the log line. */
  name: string;
  prefix: readonly string[];
}

/**
 * Tried in order at the first command. `unshare` (util-linux) needs root or user namespaces;
 * `--kill-child` takes the command down with `unshare` (older util-linux lacks it: the second
 * form). `bwrap` (bubblewrap) may be setuid where user namespaces are off.
 */
export const SHELL_ISOLATIONS: readonly ShellIsolation[] = [
  { name: "unshare", prefix: ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"] },
  { name: "unshare", prefix: ["unshare", "--pid", "--fork", "--mount-proc"] },
  {
    name: "bwrap",
    prefix: ["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--die-with-parent", "--"],
  },
];

/** How long the probe of one isolation may take. */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Run inside the isolation: prints the PID namespace and the pid `/proc` shows for the probe
 * itself. Both must differ from the host's view: another namespace, and a `/proc` of that
 * namespace (a small pid), not the host's `/proc` seen from it.
 */
const PROBE_SCRIPT = "readlink /proc/self/ns/pid; cut -d' ' -f1 /proc/self/stat";

const probes = new WeakMap<readonly ShellIsolation[], Promise<ShellIsolation | undefined>>();

/**
 * The first of `candidates` that works on this machine, or undefined when none does. Probed once
 * per list (the result is cached for the life of the process).
 */
export function findShellIsolation(
  candidates: readonly ShellIsolation[] = SHELL_ISOLATIONS,
): Promise<ShellIsolation | undefined> {
  let probe = probes.get(candidates);
  if (probe === undefined) {
    probe = (async () => {
      for (const candidate of candidates) {
        if (await isWorking(candidate)) return candidate;
      }
      return undefined;
    })();
    probes.set(candidates, probe);
  }
  return probe;
}

function hostPidNamespace(): string | undefined {
  try {
    return readlinkSync("/proc/self/ns/pid");
  } catch {
    return undefined;
  }
}

function isWorking(candidate: ShellIsolation): Promise<boolean> {
  const host = hostPidNamespace();
  if (host === undefined) return Promise.resolve(false);
  const [program, ...args] = candidate.prefix;
  if (program === undefined) return Promise.resolve(false);
  return new Promise((resolve) => {
    execFile(
      program,
      [...args, "/bin/sh", "-c", PROBE_SCRIPT],
      { timeout: PROBE_TIMEOUT_MS, env: { PATH: SYSTEM_PATH } },
      (error, stdout) => {
        if (error !== null) return resolve(false);
        const [namespace, pid] = stdout.trim().split("\n");
        resolve(namespace !== undefined && namespace !== host && Number(pid) > 0 && Number(pid) < 10);
      },
    );
  });
}

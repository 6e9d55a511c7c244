import { UsageError } from "./cli-context.js";
import { closestMatch } from "./closest-match.js";

/** How a flag takes its value. */
export type FlagKind = "string" | "boolean";

export interface ParsedArgs {
  command: string | undefined;
  positionals: string[];
  flags: Record<string, string | boolean | undefined>;
}

/**
 * A small, strict argv parser: `--name value`, `--name=value`, boolean `--name`, `--` ends the
 * flags. An unknown flag or a missing value is a {@link UsageError} (one line, exit 2).
 */
export function parseArgs(argv: readonly string[], known: Readonly<Record<string, FlagKind>>): ParsedArgs {
  const positionals: string[] = [];
  const flags: Record<string, string | boolean | undefined> = {};
  let command: string | undefined;
  let onlyPositionals = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (onlyPositionals || !arg.startsWith("-") || arg === "-") {
      if (command === undefined) command = arg;
      else positionals.push(arg);
      continue;
    }
    if (arg === "--") {
      onlyPositionals = true;
      continue;
    }
    if (arg === "-h") {
      flags.help = true;
      continue;
    }
    if (!arg.startsWith("--"))
      throw new UsageError(`unknown option ${arg}${didYouMean(arg.replace(/^-+/, ""), known)}`);
    const equals = arg.indexOf("=");
    const name = arg.slice(2, equals === -1 ? undefined : equals);
    const kind = known[name];
    if (kind === undefined) throw new UsageError(`unknown option --${name}${didYouMean(name, known)}`);
    if (kind === "boolean") {
      if (equals !== -1) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    let value: string | undefined;
    if (equals !== -1) value = arg.slice(equals + 1);
    else {
      value = argv[i + 1];
      if (value === undefined || (value.startsWith("--") && value.length > 2)) {
        throw new UsageError(`--${name} needs a value`);
      }
      i += 1;
    }
    flags[name] = value;
  }
  return { command, positionals, flags };
}

/** ` (did you mean --local?)` for a near miss of a known flag; empty when none is close. */
function didYouMean(name: string, known: Readonly<Record<string, FlagKind>>): string {
  const match = closestMatch(name, Object.keys(known));
  return match === undefined ? "" : ` (did you mean --${match}?)`;
}

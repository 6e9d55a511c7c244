import { errors } from "@nats-io/transport-node";
import { BusConfigError } from "./bus-errors.js";

/** An operation the NATS server refused for lack of permission. */
export interface PermissionDenial {
  operation: "publish" | "subscription";
  subject: string;
  queue?: string;
}

/** `may not publish to "x"` / `may not subscribe to "x"` (with its queue group, if any). */
export function describeDenial(denial: PermissionDenial): string {
  const queue = denial.queue === undefined ? "" : ` in queue group "${denial.queue}"`;
  return denial.operation === "publish"
    ? `may not publish to "${denial.subject}"`
    : `may not subscribe to "${denial.subject}"${queue}`;
}

/**
 * A request the NATS server refused: this user may not publish to its subject, or may not
 * subscribe to the reply inbox. The user's permissions to fix (exit 2 in the CLI), not a fault.
 */
export class PermissionDeniedError extends BusConfigError {
  readonly operation: PermissionDenial["operation"];
  readonly subject: string;

  constructor(denial: PermissionDenial, options?: { cause?: unknown }) {
    super(`the NATS server refused the request: this user ${describeDenial(denial)}`, options);
    this.operation = denial.operation;
    this.subject = denial.subject;
  }
}

/** Where the roles are written down, named in every refusal. */
const ROLES_DOC = "docs/security-nats-roles.md";

/** A NATS user lacks a permission the host needs: named, with what to grant. Exit 2 in the CLI. */
export class NatsPermissionError extends BusConfigError {
  readonly denials: readonly PermissionDenial[];

  /** `prefix`: the subject prefix, to name the allow entry that covers each refused subject. */
  constructor(denials: readonly PermissionDenial[], prefix: string) {
    super(
      `the NATS user lacks permissions this host needs: ${denials.map((denial) => describeWithGrant(denial, prefix)).join("; ")} (the host role is in ${ROLES_DOC})`,
    );
    this.denials = denials;
  }
}

/** The refused subject and operation of `error` or one of its causes, if it is a refusal. */
export function permissionDenialOf(error: unknown): PermissionDenial | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    if (current instanceof errors.PermissionViolationError) {
      return { operation: current.operation, subject: current.subject };
    }
    current = current.cause;
  }
  return undefined;
}

function describeWithGrant(denial: PermissionDenial, prefix: string): string {
  return `${describeDenial(denial)} (grant ${denial.operation === "publish" ? "publish" : "subscribe"} "${grantFor(denial.subject, prefix)}")`;
}

/** The allow entry of the documented host role that covers `subject`. */
export function grantFor(subject: string, prefix: string): string {
  const tokens = subject.split(".");
  if (subject.startsWith("$JS.API.")) return "$JS.API.>";
  if (subject.startsWith("$KV.")) return `$KV.${tokens[1]}.>`;
  if (subject.startsWith("$SRV.")) return "$SRV.>";
  if (subject.startsWith(`${prefix}.`)) {
    const family = subject.slice(prefix.length + 1).split(".")[0];
    // Requests are taken per verb (`<prefix>.agents.*.chat`): name the pattern itself.
    return family === "agents" ? subject : `${prefix}.${family}.>`;
  }
  // A reply inbox: `<inbox prefix>.<id>`, or the request inbox `<inbox prefix>.<id>.*`.
  const inboxTokens = tokens.at(-1) === "*" ? tokens.slice(0, -2) : tokens.slice(0, -1);
  return inboxTokens.length > 0 ? `${inboxTokens.join(".")}.>` : subject;
}

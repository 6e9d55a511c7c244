import type { z } from "zod";

/**
 * A validation problem in plain words, for people editing a file: `must be a list ([…]), not an
 * object`, `is missing`, `must be one of "anthropic", "demo"`. zod's own wording ("Invalid input:
 * expected object, received array") names its types, not what the reader wrote; a message the
 * schema set itself (a refinement's) is kept as it is.
 */
export function plainIssueMessage(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "invalid_type": {
      const received = /received (\w+)/.exec(issue.message)?.[1];
      if (received === "undefined") return "is missing";
      const expected = TYPE_WORDS[issue.expected] ?? issue.expected;
      // 1.5 where a count goes: a number, but not a whole one.
      if (issue.expected === "int" && received === "number") return `must be ${expected}`;
      return received === undefined
        ? `must be ${expected}`
        : `must be ${expected}, not ${TYPE_WORDS[received] ?? received}`;
    }
    case "invalid_value":
      return issue.values.length === 1
        ? `must be ${JSON.stringify(issue.values[0])}`
        : `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}`;
    case "too_small":
    case "too_big":
      return isDefaultMessage(issue.message) ? boundMessage(issue) : issue.message;
    case "invalid_format":
      if (!isDefaultMessage(issue.message)) return issue.message;
      return "pattern" in issue && typeof issue.pattern === "string"
        ? `must match ${issue.pattern}`
        : `must be a valid ${issue.format}`;
    case "invalid_union":
      return isDefaultMessage(issue.message) ? "is not one of the accepted forms" : issue.message;
    default:
      return issue.message;
  }
}

const TYPE_WORDS: Readonly<Record<string, string>> = {
  object: "an object ({…})",
  array: "a list ([…])",
  string: "a text in quotes",
  number: "a number",
  int: "a whole number",
  boolean: "true or false",
  null: "null",
  function: "a function",
  bigint: "a number",
  date: "a date",
  nan: "not a number",
};

function isDefaultMessage(message: string): boolean {
  return /^(Invalid input|Invalid string|Invalid option|Too small|Too big|Invalid)\b/.test(message);
}

function boundMessage(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig): string {
  const isMinimum = issue.code === "too_small";
  const limit = Number(
    isMinimum ? (issue as z.core.$ZodIssueTooSmall).minimum : (issue as z.core.$ZodIssueTooBig).maximum,
  );
  const inclusive = issue.inclusive !== false;
  const bound = isMinimum ? (inclusive ? "at least" : "more than") : inclusive ? "at most" : "less than";
  switch (issue.origin) {
    case "string":
      return isMinimum && limit === 1 && inclusive
        ? "must not be empty"
        : `must be ${bound} ${limit} characters long`;
    case "array":
    case "set":
      return isMinimum && limit === 1 && inclusive
        ? "must not be empty"
        : `must hold ${bound} ${limit} items`;
    default:
      return `must be ${bound} ${limit}`;
  }
}

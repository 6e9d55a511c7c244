import { z } from "zod";
import { createToolSet, type StatefulToolSet } from "../create-tool-set.js";
import { defineTool } from "../define-tool.js";

export interface CurrentTimeToolSetOptions {
  /** The clock; injected for deterministic tests. */
  now?: () => Date;
  /**
   * The host's UTC offset in minutes east of UTC at a given instant (default: the process's local
   * zone, which honours `TZ`). Injected for tests.
   */
  utcOffsetMinutes?: (date: Date) => number;
  /** The IANA zone name shown after the time (default: the process's resolved zone). */
  timeZone?: () => string | undefined;
}

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"] as const;

/**
 * The built-in `current_time` ToolSet: no arguments; returns the host's local time as
 * ISO 8601 with its UTC offset, then the weekday and IANA zone, e.g.
 * `2026-12-02T17:04:05.123+01:00 (Wednesday, Europe/Berlin)`. The ISO string comes first so it
 * stays parseable. Stateless.
 */
export function createCurrentTimeToolSet(
  options: CurrentTimeToolSetOptions = {},
): StatefulToolSet<undefined> {
  const now = options.now ?? (() => new Date());
  const utcOffsetMinutes = options.utcOffsetMinutes ?? ((date: Date) => -date.getTimezoneOffset());
  const timeZone = options.timeZone ?? hostTimeZone;
  return createToolSet({
    name: "current_time",
    tools: [
      defineTool({
        name: "current_time",
        // A read: asking again after a restart is harmless.
        idempotent: true,
        description: "Returns the current date and time in the user's time zone (ISO 8601 with UTC offset).",
        parameters: z.object({}),
        execute: () => {
          const date = now();
          const offset = utcOffsetMinutes(date);
          const zone = timeZone();
          const weekday = WEEKDAYS[shiftedBy(date, offset).getUTCDay()];
          const details = zone === undefined || zone === "" ? weekday : `${weekday}, ${zone}`;
          return `${formatIsoWithOffset(date, offset)} (${details})`;
        },
      }),
    ],
  });
}

/**
 * `date` as ISO 8601 local time at `offsetMinutes` east of UTC, with milliseconds and the offset
 * written out (`+00:00`, never `Z`, so every answer has the same shape).
 */
export function formatIsoWithOffset(date: Date, offsetMinutes: number): string {
  const local = shiftedBy(date, offsetMinutes);
  const sign = offsetMinutes < 0 ? "-" : "+";
  const absolute = Math.abs(offsetMinutes);
  const pad = (value: number, width = 2) => String(value).padStart(width, "0");
  return (
    `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}` +
    `T${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}` +
    `.${pad(local.getUTCMilliseconds(), 3)}${sign}${pad(Math.floor(absolute / 60))}:${pad(absolute % 60)}`
  );
}

/** The UTC fields of the result are the local fields at that offset. */
function shiftedBy(date: Date, offsetMinutes: number): Date {
  return new Date(date.getTime() + offsetMinutes * 60_000);
}

function hostTimeZone(): string | undefined {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}

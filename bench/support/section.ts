import type { Row } from "./report.js";

/** Where a target of the benchmark issue stands after this run. */
export interface TargetCheck {
  target: string;
  /** The figure against the target, e.g. "1.42× the minimal XState loop". */
  stands: string;
  met: boolean;
}

/** What a benchmark section hands back to the runner. */
export interface SectionResult {
  title: string;
  rows: Row[];
  targets: TargetCheck[];
  /** Setup details and observations printed under the table. */
  notes: string[];
}

/** Shared settings of one `npm run bench`. */
export interface BenchSettings {
  natsUrl: string;
  /** Measured runs per figure. */
  runs: number;
  warmups: number;
  /** Scales sizes down for a smoke run (`--quick`). */
  isQuick: boolean;
}

/** A measured figure: the median of several runs and the spread around it. */
export interface Measure {
  median: number;
  min: number;
  max: number;
  /** How many runs the figure summarises. */
  runs: number;
}

/** The median and min–max of `samples` (at least one). */
export function summarise(samples: readonly number[]): Measure {
  if (samples.length === 0) throw new RangeError("summarise needs at least one sample");
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    median: percentile(sorted, 50),
    min: sorted[0]!,
    max: sorted[sorted.length - 1]!,
    runs: sorted.length,
  };
}

/** The p-th percentile (0–100) of an ascending array, by linear interpolation. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  const lowValue = sorted[low]!;
  return lowValue + (sorted[high]! - lowValue) * (rank - low);
}

/** A figure measured once (no spread), e.g. a peak. */
export function single(value: number): Measure {
  return { median: value, min: value, max: value, runs: 1 };
}

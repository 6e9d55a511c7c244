import type { Measure } from "./stats.js";

/** One line of the results table: agentloop's figure beside its baseline's, from the same run. */
export interface Row {
  /** What is measured; names the baseline when it is not obvious. */
  metric: string;
  agentloop: Measure;
  baseline: Measure;
  unit: string;
  /** Decimal places shown. */
  digits: number;
}

/** agentloop ÷ baseline (medians). */
export function ratioOf(row: Row): number {
  return row.agentloop.median / row.baseline.median;
}

function formatNumber(value: number, digits: number): string {
  return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** `123 µs (118–131)`: the median, then min–max over the runs (omitted for a single run). */
export function formatMeasure(measure: Measure, unit: string, digits: number): string {
  const median = `${formatNumber(measure.median, digits)}${unit === "" ? "" : ` ${unit}`}`;
  if (measure.runs <= 1) return median;
  return `${median} (${formatNumber(measure.min, digits)}–${formatNumber(measure.max, digits)})`;
}

function formatRatio(ratio: number): string {
  if (!Number.isFinite(ratio)) return "n/a";
  if (ratio >= 10) return `${ratio.toFixed(0)}×`;
  if (ratio >= 0.1) return `${ratio.toFixed(2)}×`;
  return `${ratio.toPrecision(2)}×`;
}

/** The markdown table: metric | agentloop | baseline | ratio. */
export function renderTable(rows: readonly Row[]): string {
  const lines = ["| metric | agentloop | baseline | ratio |", "|---|---:|---:|---:|"];
  for (const row of rows) {
    lines.push(
      `| ${row.metric} | ${formatMeasure(row.agentloop, row.unit, row.digits)} | ${formatMeasure(row.baseline, row.unit, row.digits)} | ${formatRatio(ratioOf(row))} |`,
    );
  }
  return lines.join("\n");
}

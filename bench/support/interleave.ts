import { forceGc } from "./force-gc.js";
import { type Measure, summarise } from "./stats.js";

export interface InterleaveOptions {
  /** Unmeasured rounds first, so every variant is optimised before it is timed. */
  warmups: number;
  runs: number;
}

/**
 * Runs each variant `warmups` times unmeasured, then `runs` measured rounds, the order rotated
 * each round so that a noisy moment does not always hit the same variant; a full GC before each
 * sample keeps one variant's garbage out of the next one's figure. Each call of a variant is one
 * sample (e.g. µs per iteration); returns the median and spread per variant.
 */
export async function interleave<K extends string>(
  variants: Record<K, () => Promise<number>>,
  options: InterleaveOptions,
): Promise<Record<K, Measure>> {
  const names = Object.keys(variants) as K[];
  for (let round = 0; round < options.warmups; round++) {
    for (const name of names) await variants[name]();
  }
  const samples = new Map<K, number[]>(names.map((name) => [name, []]));
  for (let round = 0; round < options.runs; round++) {
    for (let offset = 0; offset < names.length; offset++) {
      const name = names[(round + offset) % names.length]!;
      forceGc();
      samples.get(name)!.push(await variants[name]());
    }
  }
  return Object.fromEntries(names.map((name) => [name, summarise(samples.get(name)!)])) as Record<K, Measure>;
}

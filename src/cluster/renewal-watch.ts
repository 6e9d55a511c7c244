import { type IntervalHistogram, monitorEventLoopDelay } from "node:perf_hooks";

/** Event-loop delay is sampled this often (ms): fine enough to see a stall of a tenth of a second. */
const SAMPLE_EVERY_MS = 20;

/**
 * Watches a host lease's renewals and the event loop around them, so a lease lost on a busy host
 * says why: renewals that were answered slowly (the server or the connection), or a loop that
 * stalled so the renewal was sent late or its answer read late (the host itself). The delay
 * histogram is reset at every successful renewal: what it holds is the stretch since the last one.
 */
export class RenewalWatch {
  readonly #delay: IntervalHistogram = monitorEventLoopDelay({ resolution: SAMPLE_EVERY_MS });
  readonly #monotonic: () => number;
  #lastRenewedAt: number;
  /** This process's CPU time at the last renewal: a loop delay with little CPU used is the machine's, not the host's. */
  #cpuAtRenewal: NodeJS.CpuUsage;
  #slowestMs = 0;
  #failures = 0;
  /** Whose loop the delay is of, as the notice names it. */
  readonly #loop: string;

  /**
   * @param monotonic The clock renewals are timed on (ms).
   * @param loop The event loop watched (always the thread's own, where the renewals run), as the
   *   notice names it.
   */
  constructor(monotonic: () => number = () => performance.now(), loop = "event loop") {
    this.#monotonic = monotonic;
    this.#loop = loop;
    this.#lastRenewedAt = monotonic();
    this.#cpuAtRenewal = process.cpuUsage();
    this.#delay.enable();
  }

  /** A renewal was answered (or failed) `tookMs` after it was sent. */
  renewed(tookMs: number, isRenewed: boolean): void {
    this.#slowestMs = Math.max(this.#slowestMs, tookMs);
    if (!isRenewed) {
      this.#failures++;
      return;
    }
    this.#lastRenewedAt = this.#monotonic();
    this.#cpuAtRenewal = process.cpuUsage();
    this.#slowestMs = 0;
    this.#failures = 0;
    this.#delay.reset();
  }

  /**
   * `last renewed 8.1 s ago; since then 2 renewals failed, the slowest answer 3300 ms; event loop
   * delay max 4200 ms, p99 900 ms; CPU used 2900 ms`. A long loop delay with as much CPU used is
   * the host's own work; with little CPU used, the process was not given the CPU (a busy machine).
   */
  describe(): string {
    const ago = ((this.#monotonic() - this.#lastRenewedAt) / 1000).toFixed(1);
    const ms = (ns: number) => Math.round(ns / 1e6);
    const cpu = process.cpuUsage(this.#cpuAtRenewal);
    const cpuMs = Math.round((cpu.user + cpu.system) / 1000);
    return `last renewed ${ago} s ago; since then ${this.#failures} renewal${this.#failures === 1 ? "" : "s"} failed, the slowest answer ${Math.round(this.#slowestMs)} ms; ${this.#loop} delay max ${ms(this.#delay.max)} ms, p99 ${ms(this.#delay.percentile(99))} ms; CPU used ${cpuMs} ms`;
  }

  close(): void {
    this.#delay.disable();
  }
}

// Stopping an `rlx sft` run when a held-out score enters a band (`[eval.stop]`), rather than at a
// step fixed in advance. SFT accuracy from scratch rises slowly and then jumps within a few
// hundred steps, and where the jump comes depends on floating-point details of the CPU (the same
// recipe read 0.53 greedy pass@1 at step 1,550 on one machine and 0.185 on another), so a student
// "at step N" is not a reproducible object; a student "whose eval-200 greedy pass@1 is in
// [0.40, 0.65]" is. The run stops at the first eval inside the band and records it in
// <output_dir>/band.json beside the model; an eval past the band (the jump skipped over it) or a
// last step short of it is an error naming the values seen and the fix. `min_step` is for a
// fine-tune that starts inside the band and must train a while first (the hint-reading student):
// evals before it are recorded but neither stop the run nor fail it.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SftConfig } from "./config.ts";
import { RlxError } from "../errors.ts";

export type StopBand = NonNullable<NonNullable<SftConfig["eval"]>["stop"]>;

/** What band.json holds: the band, the value that entered it, and where. */
export interface BandRecord {
  metric: string;
  min: number;
  /** Absent: no upper bound. */
  max?: number;
  /** Absent: 0 (every eval counts). */
  min_step?: number;
  value: number;
  step: number;
  /** Every eval of the metric up to the stop, [step, value]. */
  seen: [number, number][];
}

export const BAND_FILE = "band.json";

/** Tracks the stop metric over a run's evals and says when to stop. */
export class BandWatch {
  readonly seen: [number, number][] = [];

  constructor(readonly band: StopBand) {}

  /** Records an eval's metrics; true when its value is inside the band. Throws when it jumped past it. */
  check(step: number, metrics: Record<string, number>): boolean {
    const { metric, min } = this.band;
    const max = this.band.max ?? Number.POSITIVE_INFINITY;
    const value = metrics[metric];
    if (value === undefined) {
      throw new RlxError(
        `eval.stop.metric ${metric} is not among the eval's metrics (${Object.keys(metrics).join(", ")})`,
        { fix: "name a key the eval records, e.g. eval/<env name>/greedy/pass@1" },
      );
    }
    this.seen.push([step, value]);
    if (step < this.band.min_step) return false;
    if (value > max) {
      throw new RlxError(
        `${metric} jumped past the stop band [${min}, ${max}] at step ${step} (${this.history()}); no checkpoint was inside it`,
        {
          fix: "lower eval.interval so an eval lands inside the jump, or widen the band; the checkpoints before this step are kept (save.interval)",
        },
      );
    }
    return value >= min;
  }

  /** The error for a run whose last step ended below the band. */
  shortOfBand(lastStep: number): RlxError {
    const { metric, min } = this.band;
    const max = this.band.max ?? "∞";
    return new RlxError(
      `${metric} never entered the stop band [${min}, ${max}] by the last step ${lastStep} (${this.history()})`,
      { fix: "train further: rlx sft CONFIG --resume --set trainer.steps=N (a larger N), or lower eval.stop.min" },
    );
  }

  write(runDir: string, step: number): BandRecord {
    const value = this.seen.at(-1)![1];
    const record: BandRecord = {
      metric: this.band.metric,
      min: this.band.min,
      max: this.band.max,
      ...(this.band.min_step > 0 ? { min_step: this.band.min_step } : {}),
      value,
      step,
      seen: this.seen,
    };
    writeFileSync(join(runDir, BAND_FILE), `${JSON.stringify(record, null, 2)}\n`);
    return record;
  }

  private history(): string {
    return `step:value ${this.seen.map(([s, v]) => `${s}:${v.toFixed(3)}`).join(" ")}`;
  }
}

// One optimizer step over a packed step batch (docs/architecture.md §6): the denominators first, over the whole
// step, then every micro-batch (row) through the policy's training call, accumulating gradients,
// then one optimizer step; metrics summed per component and per env.
//
// Why the denominators come first: each component's loss is sum(l_x) / N_x with N_x the member
// count of the WHOLE step, so the gradient does not depend on how the step was cut into rows (or,
// later, ranks), and components from different algorithms do not dilute each other.
//
// The driver talks to a `Learner`, not to the shim: unit tests run it against a pure-TypeScript
// learner, the end-to-end test and the trainer process against the native model (`nativeLearner` below).
import type { NativeModel } from "../native/model.ts";
import {
  METRIC_FIELDS,
  type NativeOptimizer,
  type StepMetrics as MetricSums,
  type StepResult as RowResult,
  trainStep as trainNativeRow,
} from "../native/train.ts";
import type { ComponentCounts, PackedRow, PackedStep } from "../data/pack.ts";
import type { RlLoss } from "../data/loss_types.ts";
import { stepCounts } from "../data/pack.ts";

export type { MetricSums, RowResult };

/** N_x = max(1, member count over the whole step). */
export type Denominators = ComponentCounts;

export interface OptimizerResult {
  gradNorm: number;
  /** True when the loss or gradient was not finite and the update was skipped. */
  skipped: boolean;
}

/** The model being trained and its optimizer, as one optimizer step uses them. */
export interface Learner {
  /** Forward + backward of one packed row; gradients accumulate across calls. `losses` is the
   * step's rl loss table (row.sampleLosses indexes it; absent: entry 0 for every sample). Metric
   * sums come back for the whole row (`all`) and per env index (`envs`, numEnvs blocks). */
  trainRow(row: PackedRow, numEnvs: number, denominators: Denominators, losses: readonly RlLoss[]): RowResult;
  /** Clips the global grad norm, applies the update, zeroes the gradients. */
  optimizerStep(lr: number, maxGradNorm: number): OptimizerResult;
}

export interface StepOptions {
  lr: number;
  maxGradNorm: number;
  /** The step's rl loss table (PackedStep.losses, or [trainer.loss] for a step file without one). */
  losses: readonly RlLoss[];
  /** The whole step's denominators when `step.rows` is only part of it (a data-parallel rank's
   * share, all-reduced before the first row: src/trainer/ranks.ts); absent, counted over step.rows. */
  denominators?: Denominators;
  /** Sums the metric sums over the ranks in place (flat: the `all` block, then one per env, in
   * METRIC_FIELDS order) before they are summarized, so every rank logs the whole step. */
  reduceSums?: (flat: Float64Array) => void;
}

export type StepMetrics = Record<string, number>;

export interface StepResult {
  /** Whole-step metrics: loss, loss/rl, count/rl, mismatch_kl, entropy, grad_norm, tokens_per_s, ... */
  metrics: StepMetrics;
  /** The same per env (component losses are the env's share of the step's loss). */
  perEnv: Record<string, StepMetrics>;
  denominators: Denominators;
}

export const zeroSums = (): MetricSums => Object.fromEntries(METRIC_FIELDS.map((f) => [f, 0])) as MetricSums;

function addInto(into: MetricSums, from: MetricSums): void {
  for (const f of METRIC_FIELDS) into[f] += from[f];
}

function reduceInPlace(blocks: MetricSums[], reduce: (flat: Float64Array) => void): void {
  const flat = Float64Array.from(blocks.flatMap((block) => METRIC_FIELDS.map((f) => block[f])));
  reduce(flat);
  blocks.forEach((block, b) => METRIC_FIELDS.forEach((f, i) => (block[f] = flat[b * METRIC_FIELDS.length + i]!)));
}

/** N_x = max(1, count) from the rows' member counts. */
export function denominatorsOf(rows: readonly PackedRow[]): Denominators {
  const total = stepCounts(rows);
  return {
    rl: Math.max(1, total.rl),
    ce: Math.max(1, total.ce),
    refKl: Math.max(1, total.refKl),
    distill: Math.max(1, total.distill),
    rlSequences: Math.max(1, total.rlSequences),
  };
}

const ratio = (num: number, den: number) => (den > 0 ? num / den : 0);

/** Turns summed fields into the logged means and fractions. */
export function summarize(s: MetricSums, n: Denominators): StepMetrics {
  return {
    loss: s.loss,
    "loss/rl": s.rlSum / n.rl,
    "loss/ce": s.ceSum / n.ce,
    "loss/ref_kl": s.refKlSum / n.refKl,
    "loss/distill": s.distillSum / n.distill,
    "count/rl": s.rlCount,
    "count/ce": s.ceCount,
    "count/ref_kl": s.refKlCount,
    "count/distill": s.distillCount,
    mismatch_kl: ratio(s.mismatchKlSum, s.mismatchKlCount),
    entropy: ratio(s.entropySum, s.entropyCount),
    "masked/low": ratio(s.maskedLow, s.rlCount),
    "masked/high": ratio(s.maskedHigh, s.rlCount),
    // rl members beyond a clipping type's range (gspo, cispo, clip_higher, gmpo; 0 for the others)
    "clipped/low": ratio(s.clippedLow, s.rlCount),
    "clipped/high": ratio(s.clippedHigh, s.rlCount),
    "ref_kl/masked": ratio(s.refKlMasked, s.refKlCount),
    ref_kl: ratio(s.refKlAdvSum, s.refKlCount),
    nll: ratio(s.nllSum, s.ceCount),
    tokens: s.tokens,
  };
}

/** Runs one optimizer step over a packed step batch. */
export function trainStep(learner: Learner, step: PackedStep, opts: StepOptions): StepResult {
  const started = performance.now();
  const denominators = opts.denominators ?? denominatorsOf(step.rows);
  const all = zeroSums();
  const perEnv = step.envs.map(zeroSums);
  for (const row of step.rows) {
    const result = learner.trainRow(row, step.envs.length, denominators, opts.losses);
    addInto(all, result.all);
    result.envs.forEach((sums, e) => addInto(perEnv[e]!, sums));
  }
  if (opts.reduceSums) reduceInPlace([all, ...perEnv], opts.reduceSums);
  const optim = learner.optimizerStep(opts.lr, opts.maxGradNorm);
  const seconds = (performance.now() - started) / 1000;
  const metrics = {
    ...summarize(all, denominators),
    grad_norm: optim.gradNorm,
    skipped: optim.skipped ? 1 : 0,
    lr: opts.lr,
    micro_batches: step.rows.length,
    seconds,
    tokens_per_s: ratio(step.tokens, seconds),
  };
  const envMetrics = Object.fromEntries(step.envs.map((env, e) => [env, summarize(perEnv[e]!, denominators)]));
  return { metrics, perEnv: envMetrics, denominators };
}

/** The Learner over the native shim: a model and its AdamW optimizer (src/native/). */
export function nativeLearner(model: NativeModel, optimizer: NativeOptimizer): Learner {
  return {
    trainRow(row, numEnvs, n, losses) {
      const settings = {
        nRl: n.rl,
        nCe: n.ce,
        nRefKl: n.refKl,
        nDistill: n.distill,
        nRlSequences: n.rlSequences,
        losses,
      };
      return trainNativeRow(model, row, settings, numEnvs);
    },
    optimizerStep(lr, maxGradNorm) {
      const { gradNorm, skipped } = optimizer.step(lr, maxGradNorm);
      return { gradNorm, skipped };
    },
  };
}

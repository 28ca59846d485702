// One optimizer step over a packed step batch (DESIGN §6): the denominators first, over the whole
// step, then every micro-batch (row) through the policy's training call, accumulating gradients,
// then one optimizer step; metrics summed per component and per env.
//
// Why the denominators come first: each component's loss is sum(l_x) / N_x with N_x the member
// count of the WHOLE step, so the gradient does not depend on how the step was cut into rows (or,
// later, ranks), and components from different algorithms do not dilute each other.
//
// The driver talks to a `Policy`, not to the shim: unit tests run it against a pure-TypeScript
// policy, the end-to-end test and the trainer process against the native model (native_policy.ts).
import type { ComponentCounts, PackedRow, PackedStep } from "../orchestrator/pack.ts";
import { rowCounts } from "../orchestrator/pack.ts";

/** The rl loss settings (config `trainer.loss`); ref_kl's 0.2 / 1e-3 are fixed. */
export interface LossSettings {
  dppo_mask_low: number;
  dppo_mask_high: number;
  adv_tau: number;
  kl_tau: number;
}

/** N_x = max(1, member count over the whole step). */
export interface Denominators {
  rl: number;
  ce: number;
  refKl: number;
}

/** What one training call reports, summed over the tokens of a row (or of one env in it). The
 * order is the shim's metric layout (rlx.h RLX_M_*). */
export const METRIC_FIELDS = [
  "loss", // sum of the row's per-token loss, already divided by the denominators
  "rl_sum",
  "rl_count",
  "ce_sum",
  "ce_count",
  "ref_kl_sum",
  "ref_kl_count",
  "mismatch_kl",
  "mismatch_kl_count",
  "entropy",
  "entropy_count",
  "masked_low",
  "masked_high",
  "ref_kl_masked",
  "ref_kl",
  "nll",
  "tokens",
] as const;
export type MetricField = (typeof METRIC_FIELDS)[number];
export type MetricSums = Record<MetricField, number>;

export interface RowResult {
  all: MetricSums;
  /** One entry per env of the step (PackedStep.envs order). */
  perEnv: MetricSums[];
}

export interface OptimizerResult {
  gradNorm: number;
  /** True when the loss or gradient was not finite and the update was skipped. */
  skipped: boolean;
}

export interface Policy {
  /** Forward + backward of one packed row; gradients accumulate across calls. */
  trainRow(row: PackedRow, numEnvs: number, denominators: Denominators, loss: LossSettings): RowResult;
  /** Clips the global grad norm, applies the update, zeroes the gradients. */
  optimizerStep(lr: number, maxGradNorm: number): OptimizerResult;
}

export interface StepOptions {
  lr: number;
  maxGradNorm: number;
  loss: LossSettings;
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

/** N_x = max(1, count) from the rows' member counts. */
export function denominatorsOf(rows: readonly PackedRow[]): Denominators {
  const total: ComponentCounts = { rl: 0, ce: 0, refKl: 0 };
  for (const row of rows) {
    const c = rowCounts(row);
    total.rl += c.rl;
    total.ce += c.ce;
    total.refKl += c.refKl;
  }
  return { rl: Math.max(1, total.rl), ce: Math.max(1, total.ce), refKl: Math.max(1, total.refKl) };
}

const ratio = (num: number, den: number) => (den > 0 ? num / den : 0);

/** Turns summed fields into the logged means and fractions. */
export function summarize(s: MetricSums, n: Denominators): StepMetrics {
  return {
    loss: s.loss,
    "loss/rl": s.rl_sum / n.rl,
    "loss/ce": s.ce_sum / n.ce,
    "loss/ref_kl": s.ref_kl_sum / n.refKl,
    "count/rl": s.rl_count,
    "count/ce": s.ce_count,
    "count/ref_kl": s.ref_kl_count,
    mismatch_kl: ratio(s.mismatch_kl, s.mismatch_kl_count),
    entropy: ratio(s.entropy, s.entropy_count),
    "masked/low": ratio(s.masked_low, s.rl_count),
    "masked/high": ratio(s.masked_high, s.rl_count),
    "ref_kl/masked": ratio(s.ref_kl_masked, s.ref_kl_count),
    ref_kl: ratio(s.ref_kl, s.ref_kl_count),
    nll: ratio(s.nll, s.ce_count),
    tokens: s.tokens,
  };
}

/** Runs one optimizer step over a packed step batch. */
export function trainStep(policy: Policy, step: PackedStep, opts: StepOptions): StepResult {
  const started = performance.now();
  const denominators = denominatorsOf(step.rows);
  const all = zeroSums();
  const perEnv = step.envs.map(zeroSums);
  for (const row of step.rows) {
    const result = policy.trainRow(row, step.envs.length, denominators, opts.loss);
    addInto(all, result.all);
    result.perEnv.forEach((sums, e) => addInto(perEnv[e]!, sums));
  }
  const optim = policy.optimizerStep(opts.lr, opts.maxGradNorm);
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

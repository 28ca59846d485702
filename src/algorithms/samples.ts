// Scored rollout -> training samples (docs/architecture.md §4): the flat, full-length form the packer and the
// trainer consume. One sample per sample of the rollout (one, unless the extension property
// broke), each a slice of the rollout's per-token annotations, then the routing stamp puts the
// action tokens into the algorithm's loss component.
//
// Then the zero-advantage filter (on by default, as prime-rl's orchestrator does when it cuts a batch): an action token with
// advantage 0 gets rl weight 0 (it would only add its KL term and its share of N_rl), and a sample
// left with no member in any component is dropped. It never touches ce or ref_kl members, so
// distillation samples (no advantages at all) pass through untouched.
import type { LossComponent } from "./base.ts";
import { checkAnnotation, checkDistillTargets, stampLossRouting } from "./routing.ts";
import { sampleRanges, type Rollout, type TrainingSample } from "../data/types.ts";
import type { ComponentCounts } from "../data/pack.ts";

/** The training samples of one scored rollout, routed into `actionLoss`. */
export function rolloutToSamples(rollout: Rollout, actionLoss: LossComponent): TrainingSample[] {
  for (const name of [
    "advantages",
    "refLogprobs",
    "rlWeights",
    "ceWeights",
    "refKlWeights",
    "distillWeights",
  ] as const) {
    checkAnnotation(rollout, name, rollout[name]);
  }
  const targets = rollout.distillTargets;
  if (targets) checkDistillTargets(rollout, targets);
  const lossMask_N: number[] = [];
  const logprobs_N: number[] = [];
  const temperatures_N: number[] = [];
  for (const seg of rollout.segments) {
    for (let i = 0; i < seg.tokenIds.length; i++) {
      lossMask_N.push(seg.sampled ? 1 : 0);
      logprobs_N.push(seg.sampled ? (seg.logprobs?.[i] ?? 0) : 0);
      temperatures_N.push(seg.sampled ? (seg.temperature ?? 1) : 1);
    }
  }
  const tokenIds_N = rollout.segments.flatMap((s) => s.tokenIds);
  return sampleRanges(rollout).map(([start, end]) => {
    const cut = (values: readonly number[] | undefined) => values?.slice(start, end);
    const sample: TrainingSample = {
      tokenIds: tokenIds_N.slice(start, end),
      lossMask: lossMask_N.slice(start, end),
      advantages: cut(rollout.advantages) ?? new Array<number>(end - start).fill(0),
      inferenceLogprobs: logprobs_N.slice(start, end),
      temperatures: temperatures_N.slice(start, end),
      env: rollout.env,
      rolloutId: rollout.id,
    };
    for (const key of ["refLogprobs", "rlWeights", "ceWeights", "refKlWeights", "distillWeights"] as const) {
      const values = cut(rollout[key]);
      if (values) sample[key] = values;
    }
    if (targets) {
      const { k } = targets;
      sample.distillTargets = {
        k,
        ids: targets.ids.slice(start * k, end * k),
        logprobs: targets.logprobs.slice(start * k, end * k),
      };
      sample.distillBetas = new Array<number>(end - start).fill(targets.beta);
    }
    stampLossRouting(sample, actionLoss);
    return sample;
  });
}

/** Member tokens per component (docs/architecture.md §6): rl = mask & rlW != 0, ce = ceW != 0, ref_kl = refKlW != 0,
 * distill = distillW != 0. */
export function memberCounts(sample: TrainingSample): ComponentCounts {
  const counts = { rl: 0, ce: 0, refKl: 0, distill: 0, rlSequences: 0 };
  for (let i = 0; i < sample.tokenIds.length; i++) {
    if (sample.lossMask[i] && (sample.rlWeights ? sample.rlWeights[i] !== 0 : true)) counts.rl++;
    if (sample.ceWeights && sample.ceWeights[i] !== 0) counts.ce++;
    if (sample.refKlWeights && sample.refKlWeights[i] !== 0) counts.refKl++;
    if (sample.distillWeights && sample.distillWeights[i] !== 0) counts.distill++;
  }
  counts.rlSequences = counts.rl > 0 ? 1 : 0;
  return counts;
}

export interface FilterResult {
  kept: TrainingSample[];
  /** Samples dropped for having no member left in any component. */
  dropped: number;
  /** Action tokens whose rl membership was removed. */
  zeroedTokens: number;
}

/** The zero-advantage filter. Edits samples in place; the rl stream materializes only when a
 * token actually changes, so untouched samples stay on the trainer's hot path. */
export function filterZeroAdvantage(samples: readonly TrainingSample[]): FilterResult {
  const kept: TrainingSample[] = [];
  let zeroedTokens = 0;
  for (const sample of samples) {
    for (let i = 0; i < sample.tokenIds.length; i++) {
      const rlMember = sample.lossMask[i] && (sample.rlWeights ? sample.rlWeights[i] !== 0 : true);
      if (!rlMember || sample.advantages[i] !== 0) continue;
      sample.rlWeights ??= sample.lossMask.map((m) => (m ? 1 : 0));
      sample.rlWeights[i] = 0;
      zeroedTokens++;
    }
    const counts = memberCounts(sample);
    if (counts.rl + counts.ce + counts.refKl + counts.distill > 0) kept.push(sample);
  }
  return { kept, dropped: samples.length - kept.length, zeroedTokens };
}

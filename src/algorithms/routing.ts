// Where credit lands on tokens. Two halves:
//   - annotation helpers the algorithms call: spread a scalar (or per-action-token) advantage over
//     a rollout's action tokens, align per-token reference logprobs with a rollout;
//   - the routing stamp the sample builder applies after the algorithm has run: the action tokens
//     go into the algorithm's declared loss component (as prime-rl's orchestrator/algo/routing.py).
// Rollout annotations are full length (every token of every sample, docs/architecture.md §4): 0 off the action
// tokens, so a sample is a plain slice and the trainer never needs a separate index.
import { RlxError } from "../errors.ts";
import type { LossComponent } from "./base.ts";
import {
  type CreditPart,
  type DistillTargets,
  rolloutLength,
  type Rollout,
  type TrainingSample,
} from "../data/types.ts";

/** Per token of the rollout: true on sampled (action) tokens. */
export function actionMask(rollout: Rollout): boolean[] {
  const mask: boolean[] = [];
  for (const s of rollout.segments) for (let i = 0; i < s.tokenIds.length; i++) mask.push(s.sampled);
  return mask;
}

/** The parts of a rollout a credit judge weighs: its assistant turns (sampled segments) in order, each
 * with its [start, end) in the concatenated token stream and weight 0 until the judge says. */
export function creditParts(rollout: Rollout): CreditPart[] {
  const parts: CreditPart[] = [];
  let offset = 0;
  for (const segment of rollout.segments) {
    const end = offset + segment.tokenIds.length;
    if (segment.sampled && end > offset)
      parts.push({ part: parts.length + 1, messageIndex: segment.messageIndex, start: offset, end, weight: 0 });
    offset = end;
  }
  return parts;
}

/** The token ids of each sample of the rollout (one sequence unless the extension property broke):
 * what a model scores when it prefills "the rollout". */
export function sampleSequences(rollout: Rollout): number[][] {
  const sequences: number[][] = [];
  for (const s of rollout.segments) (sequences[s.sample] ??= []).push(...s.tokenIds);
  return sequences;
}

/**
 * Sets `rollout.advantages` (full length, 0 off the action tokens) and `rollout.advantage` (the
 * scalar credit; for a per-token list, its mean). A list holds one value per action token, in order.
 */
export function assignAdvantage(rollout: Rollout, value: number | readonly number[]): void {
  const mask = actionMask(rollout);
  const actions = mask.filter(Boolean).length;
  if (typeof value !== "number" && value.length !== actions) {
    throw new RlxError(
      `advantages for rollout ${rollout.id} must align with its ${actions} action tokens, got ${value.length} values`,
      {
        fix: "give one scalar, or one value per sampled token in order",
      },
    );
  }
  const advantages_N = new Array<number>(mask.length).fill(0);
  let k = 0;
  let sum = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const a = typeof value === "number" ? value : value[k]!;
    advantages_N[i] = a;
    sum += a;
    k++;
  }
  rollout.advantages = advantages_N;
  rollout.advantage = typeof value === "number" ? value : actions ? sum / actions : 0;
}

/**
 * Sets `rollout.refLogprobs` from a full-length score of the rollout's tokens
 * (`refLogprobs_N[i] = log p_ref(token_i | tokens before i in its sample)`), keeping the values on
 * action tokens and 0 elsewhere: only action tokens feed ref_kl, and zeros keep the audit honest.
 */
export function assignRefLogprobs(rollout: Rollout, scores_N: readonly number[]): void {
  const mask = actionMask(rollout);
  if (scores_N.length !== mask.length) {
    throw new RlxError(
      `reference logprobs for rollout ${rollout.id} must have its length ${mask.length}, got ${scores_N.length}`,
      {
        fix: "score every token of every sample of the rollout, in order",
      },
    );
  }
  rollout.refLogprobs = scores_N.map((lp, i) => (mask[i] ? lp : 0));
}

/** Checks a rollout's top-k distillation targets: k slots for each of its tokens, beta in [0, 1]. */
export function checkDistillTargets(rollout: Rollout, targets: DistillTargets): void {
  const n = rolloutLength(rollout) * targets.k;
  const fix = "distillTargets holds k slots per token of every segment, in order (see src/data/types.ts)";
  if (!Number.isInteger(targets.k) || targets.k < 1)
    throw new RlxError(`rollout ${rollout.id}: distillTargets.k is ${targets.k}, it must be an integer >= 1`, { fix });
  if (targets.ids.length !== n || targets.logprobs.length !== n)
    throw new RlxError(
      `rollout ${rollout.id}: distillTargets has ${targets.ids.length} ids and ${targets.logprobs.length} logprobs, the rollout needs ${n} (k = ${targets.k})`,
      { fix },
    );
  if (!(targets.beta >= 0 && targets.beta <= 1))
    throw new RlxError(`rollout ${rollout.id}: distillTargets.beta is ${targets.beta}, it must be in [0, 1]`, { fix });
}

/**
 * Sets `rollout.distillTargets` from each sample's scored top-k (`top[t]`: the k most likely tokens
 * of the distribution that predicts token t, null at a sample's first token), keeping the slots
 * of action tokens and emptying the rest (id -1): only action tokens are distill members.
 */
export function assignDistillTargets(
  rollout: Rollout,
  top_N: readonly ({ ids: readonly number[]; logprobs: readonly number[] } | null)[],
  k: number,
  beta: number,
): void {
  const mask = actionMask(rollout);
  if (top_N.length !== mask.length) {
    throw new RlxError(
      `the teacher's top-k for rollout ${rollout.id} covers ${top_N.length} tokens, the rollout has ${mask.length}`,
      {
        fix: "score every token of every sample of the rollout, in order",
      },
    );
  }
  const ids = new Array<number>(mask.length * k).fill(-1);
  const logprobs = new Array<number>(mask.length * k).fill(0);
  top_N.forEach((top, i) => {
    if (!mask[i] || !top) return;
    if (top.ids.length < k)
      throw new RlxError(
        `the teacher returned ${top.ids.length} top logprobs at token ${i} of rollout ${rollout.id}, asked for ${k}`,
        {
          fix: "the teacher must answer prompt_logprobs = k with k alternatives per position (rlx serve --max-logprobs, vLLM --max-logprobs)",
        },
      );
    for (let j = 0; j < k; j++) {
      ids[i * k + j] = top.ids[j]!;
      logprobs[i * k + j] = top.logprobs[j]!;
    }
  });
  rollout.distillTargets = { k, beta, ids, logprobs };
}

/** Checks that an annotation array has the rollout's length (a custom algorithm's bug otherwise). */
export function checkAnnotation(rollout: Rollout, name: string, values: readonly number[] | undefined): void {
  if (values === undefined) return;
  const n = rolloutLength(rollout);
  if (values.length !== n) {
    throw new RlxError(`rollout ${rollout.id}: ${name} has ${values.length} values, the rollout has ${n} tokens`, {
      fix: "per-token annotations span every token of every segment, in order (see src/data/types.ts)",
    });
  }
}

/**
 * Stamps the action tokens (lossMask) into the algorithm's component:
 *   rl:      nothing; absent streams mean rl 1 on the mask (the hot path), an algorithm's ce stream
 *            (echo) survives untouched.
 *   ce:      rl 0 everywhere; ce 1.0 written on the action tokens, merged into an existing stream.
 *   ref_kl:  rl 0 everywhere; a fresh ref_kl stream, 1.0 on the action tokens.
 *   distill: rl 0 everywhere; a distill stream on the action tokens, 1.0 or the algorithm's own
 *            weight there (min_teacher_prob's cut); the sample must carry the teacher's top-k:
 *            distillTargets.
 */
export function stampLossRouting(sample: TrainingSample, component: LossComponent): void {
  if (component === "rl") return;
  const n = sample.tokenIds.length;
  sample.rlWeights = new Array<number>(n).fill(0);
  if (component === "ce") {
    const ce = sample.ceWeights ? [...sample.ceWeights] : new Array<number>(n).fill(0);
    for (let i = 0; i < n; i++) if (sample.lossMask[i]) ce[i] = 1;
    sample.ceWeights = ce;
  } else if (component === "ref_kl") {
    sample.refKlWeights = sample.lossMask.map((m) => (m ? 1 : 0));
  } else {
    if (!sample.distillTargets)
      throw new RlxError(
        `rollout ${sample.rolloutId}: its action tokens go to the distill loss but it has no distillTargets`,
        {
          fix: "an algorithm whose actionLoss is distill sets rollout.distillTargets (assignDistillTargets in routing.ts)",
        },
      );
    const own = sample.distillWeights;
    sample.distillWeights = sample.lossMask.map((m, i) => (m ? (own?.[i] ?? 1) : 0));
  }
}

// Top-k distillation settings shared by opd and opsd (docs/algorithms.md, "Top-k distillation"):
// `k` teacher tokens per position, the divergence and its beta. k = 0 (the default) keeps the
// sampled-token ref_kl loss; k > 0 routes the action tokens into the trainer's distill component
// with the teacher's top-k (its rest of the mass as one tail bucket) scored at temperature 1. The
// divergence defaults to the reverse KL, the one k = 0 estimates, so k changes the estimator and
// not the objective; forward_kl and jsd are explicit choices.
// `min_teacher_prob` cuts each sample at its first action token the teacher gives less than that
// probability: the token itself still trains, the sample's later tokens do not.
import { z } from "zod";
import { EndpointError } from "../errors.ts";
import { sampleRanges, type Rollout } from "../data/types.ts";
import type { SamplingClient, ScoredSequence } from "../clients/types.ts";
import type { LossComponent, RuleViolation } from "./base.ts";
import { actionMask } from "./routing.ts";

export const DIVERGENCES = ["forward_kl", "reverse_kl", "jsd"] as const;
export type Divergence = (typeof DIVERGENCES)[number];

/** The fields opd and opsd add to their schema. */
export const distillFields = {
  /** Teacher tokens per position for the distill loss; 0 = the sampled-token reverse KL (ref_kl). */
  k: z.number().int().min(0).max(4096).default(0),
  /** reverse_kl (student || teacher, the default: the seed's OPD, which k = 0 estimates from the
   * sampled token), forward_kl (teacher || student: raises every token the teacher likes), or jsd
   * (generalized Jensen-Shannon with `beta`). k = 0 trains reverse_kl only. */
  divergence: z.enum(DIVERGENCES).optional(),
  /** jsd's mixture weight of the teacher, in (0, 1); 0.5 when absent. */
  beta: z.number().gt(0).lt(1).optional(),
  /** Cut each sample after its first action token whose teacher probability is below this: past a
   * token the teacher would not have written, its distribution is conditioned off its own. */
  min_teacher_prob: z.number().gt(0).lt(1).optional(),
};

export interface DistillConfig {
  k: number;
  divergence?: Divergence;
  beta?: number;
  min_teacher_prob?: number;
}

/** The per-token beta the trainer reads: 0 forward KL, 1 reverse KL, jsd's beta between. */
export function distillBeta(config: DistillConfig): number {
  const divergence = config.divergence ?? "reverse_kl";
  return divergence === "forward_kl" ? 0 : divergence === "reverse_kl" ? 1 : (config.beta ?? 0.5);
}

/** The rules the schema alone cannot check: with k = 0 only the reverse KL (the sampled-token
 * estimate) and no beta or min_teacher_prob; beta only with jsd. */
export function checkDistillConfig(config: DistillConfig): RuleViolation | undefined {
  if (config.k === 0 && config.divergence !== undefined && config.divergence !== "reverse_kl")
    return {
      key: "divergence",
      message: `k = 0 trains the reverse KL from each sampled token; ${config.divergence} needs the teacher's distribution`,
      fix: "set k to the teacher tokens per position (e.g. k = 16), or remove divergence",
    };
  const topKOnly = (["beta", "min_teacher_prob"] as const).find((key) => config[key] !== undefined);
  if (config.k === 0 && topKOnly)
    return {
      key: topKOnly,
      message: `${topKOnly} shapes the top-k distillation loss, which k = 0 (the sampled-token loss) does not use`,
      fix: `set k to the teacher tokens per position (e.g. k = 16), or remove ${topKOnly}`,
    };
  if (config.beta !== undefined && config.divergence !== "jsd")
    return {
      key: "beta",
      message: `beta is the generalized JSD's mixture weight; divergence is ${config.divergence ?? "reverse_kl (the default)"}`,
      fix: 'set divergence = "jsd", or remove beta',
    };
  return undefined;
}

/**
 * Distillation's one temperature rule: the ref_kl and distill components compare the student with a
 * teacher whose logprobs are of temperature 1 (prefill logprobs, top-k at temperature 1), and the
 * student's side is read at its sampling temperature (ref_kl) or at 1 (distill). So an env whose
 * actions train either one samples at temperature 1, or 0 (greedy turns report temperature-1
 * logprobs): teacher and student are then both at temperature 1, for k = 0 and k > 0 alike.
 * Returns what is wrong with `temperature`, the env's sampling temperature, or undefined.
 */
export function distillTemperatureRule(
  algorithm: string,
  actionLoss: LossComponent,
  temperature: number,
): { message: string; fix: string } | undefined {
  if (actionLoss !== "ref_kl" && actionLoss !== "distill") return undefined;
  if (temperature === 1 || temperature === 0) return undefined;
  return {
    message: `${algorithm} compares the student with its teacher at temperature 1, so its env samples at 1 (or 0, greedy), not ${temperature}`,
    fix: 'set the env\'s temperature = 1.0 (docs/algorithms.md, "Top-k distillation": the temperature rule)',
  };
}

/** Scores sequences with their top-k through a client, checking it can and did answer (names `who`). */
export async function scoreTopK(
  client: SamplingClient,
  sequences: number[][],
  k: number,
  who: string,
): Promise<ScoredSequence[]> {
  if (!client.scoreTop)
    throw new EndpointError(`${who} cannot score with top-k logprobs, which k = ${k} needs`, {
      fix: "serve it with rlx serve (or vLLM) over HTTP, or set k = 0",
    });
  const scored = await client.scoreTop(sequences, k);
  sequences.forEach((seq, i) => {
    if (scored[i]?.logprobs.length !== seq.length || scored[i]?.top.length !== seq.length)
      throw new EndpointError(
        `${who} returned ${scored[i]?.logprobs.length ?? 0} prompt logprobs for ${seq.length} tokens`,
        { fix: "the endpoint must return one prompt logprob and its top-k per token (vLLM prompt_logprobs = k)" },
      );
  });
  return scored;
}

/**
 * min_teacher_prob's cut: sets `rollout.distillWeights`, 1 on each sample's action tokens up to and
 * including the first whose teacher logprob (`sampledLogprobs_N`, the sampled tokens' own, all
 * samples concatenated, as assignDistillTargets checked them) is below log(minProb), 0 after it;
 * and `metrics.distill_kept`, the share of action tokens left in the loss.
 */
export function cutAtSurprise(rollout: Rollout, sampledLogprobs_N: readonly number[], minProb: number): void {
  const mask = actionMask(rollout);
  const floor = Math.log(minProb);
  const weights_N = new Array<number>(mask.length).fill(0);
  let actions = 0;
  let kept = 0;
  for (const [start, end] of sampleRanges(rollout)) {
    let cut = false;
    for (let i = start; i < end; i++) {
      if (!mask[i]) continue;
      actions++;
      if (cut) continue;
      weights_N[i] = 1;
      kept++;
      cut = sampledLogprobs_N[i]! < floor;
    }
  }
  rollout.distillWeights = weights_N;
  rollout.metrics = { ...rollout.metrics, distill_kept: actions ? kept / actions : 1 };
}

// MaxRL (Tajwar et al., arXiv 2602.02710): maximum-likelihood RL for binary rewards.
//
//   A_i = (r_i - mean) / mean,   and A = 0 for the whole group when mean <= 0
//
// With K successes out of N, a success gets N/K - 1 and a failure -1: the estimator is unbiased
// for the order-N truncation of log(pass rate), so hard prompts (small p) weigh about 1/p, where
// plain RL weighs them 1. Assumes non-negative, ideally binary rewards (partial credit breaks the
// maximum-likelihood reading). As prime-rl: no epsilon in the denominator, zero when mean <= 0.
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type LossComponent } from "./base.ts";
import { maxRl } from "./group.ts";
import { assignAdvantage } from "./routing.ts";
import { samplingSchema } from "./schemas.ts";

const schema = z.strictObject({ type: z.literal("max_rl"), sampling: samplingSchema });

export class MaxRl extends Algorithm<z.infer<typeof schema>> {
  static override type = "max_rl";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema = schema;

  override async scoreGroup(group: Rollout[]): Promise<void> {
    const advantages_G = maxRl(group.map((r) => r.reward));
    group.forEach((rollout, i) => assignAdvantage(rollout, advantages_G[i]!));
  }
}

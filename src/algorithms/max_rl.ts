// MaxRL (Tajwar et al., arXiv 2602.02710): maximum-likelihood RL for binary rewards.
//
//   A_i = (r_i - mean) / mean,   and A = 0 for the whole group when mean <= 0
//
// With K successes out of N, a success gets N/K - 1 and a failure -1: the estimator is unbiased
// for the order-N truncation of log(pass rate), so hard prompts (small p) weigh about 1/p, where
// plain RL weighs them 1. Assumes non-negative, ideally binary rewards (partial credit breaks the
// maximum-likelihood reading). As prime-rl: no epsilon in the denominator, zero when mean <= 0.
// `overlong = { buffer = L_cache }` adds DAPO's soft overlong punishment to each reward first
// (overlong.ts): its penalties are negative, so a group whose successes all ran long can reach
// mean <= 0 and train nothing.
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type AlgorithmContext, type LossComponent } from "./base.ts";
import { maxRl } from "./group.ts";
import { OverlongShaping, overlongSchema } from "./overlong.ts";
import { assignAdvantage } from "./routing.ts";
import { samplingSchema } from "./schemas.ts";

const schema = z.strictObject({
  type: z.literal("max_rl"),
  sampling: samplingSchema,
  /** DAPO's soft overlong punishment (overlong.ts); absent: off. */
  overlong: overlongSchema.optional(),
});

export class MaxRl extends Algorithm<z.infer<typeof schema>> {
  static override type = "max_rl";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema = schema;
  private readonly overlong = new OverlongShaping(this.config.overlong);

  override async setup(ctx: AlgorithmContext): Promise<void> {
    this.overlong.setup(ctx);
  }

  override async scoreGroup(group: Rollout[]): Promise<void> {
    const advantages_G = maxRl(this.overlong.rewards(group));
    group.forEach((rollout, i) => assignAdvantage(rollout, advantages_G[i]!));
  }
}

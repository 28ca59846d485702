// RLOO, REINFORCE with a leave-one-out baseline (Ahmadian et al., arXiv 2402.14740; Kool et al.,
// "Buy 4 REINFORCE samples, get a baseline for free!", 2019).
//
//   A_i = r_i - 1/(G-1) sum_{j != i} r_j  =  G/(G-1) (r_i - mean_j r_j)
//
// over the group's G trainable rollouts, broadcast to every action token of rollout i; the rl loss
// consumes them. A rollout's baseline never includes its own reward, so the estimate is unbiased;
// it is GRPO's centering (Dr. GRPO, no std division) scaled by G/(G-1). A singleton group has no
// baseline and gets 0; a group whose rewards are all equal gets exactly 0.
// `overlong = { buffer = L_cache }` adds DAPO's soft overlong punishment to each reward first
// (overlong.ts). examples/algorithms/rloo.ts is the same estimator written as a custom algorithm
// file (the example of that form).
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type AlgorithmContext, type LossComponent } from "./base.ts";
import { rloo } from "./group.ts";
import { OverlongShaping, overlongSchema } from "./overlong.ts";
import { assignAdvantage } from "./routing.ts";
import { samplingSchema } from "./schemas.ts";

const schema = z.strictObject({
  type: z.literal("rloo"),
  sampling: samplingSchema,
  /** DAPO's soft overlong punishment (overlong.ts); absent: off. */
  overlong: overlongSchema.optional(),
});

export class Rloo extends Algorithm<z.infer<typeof schema>> {
  static override type = "rloo";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema = schema;
  private readonly overlong = new OverlongShaping(this.config.overlong);

  override async setup(ctx: AlgorithmContext): Promise<void> {
    this.overlong.setup(ctx);
  }

  override async scoreGroup(group: Rollout[]): Promise<void> {
    const advantages_G = rloo(this.overlong.rewards(group));
    group.forEach((rollout, i) => assignAdvantage(rollout, advantages_G[i]!));
  }
}

// REINFORCE++ (Hu et al., arXiv 2501.03262): critic-free REINFORCE whose advantages are normalized
// over the whole batch, not per prompt group.
//
//   baseline = "group" (default, REINFORCE++-baseline):  a_i = r_i - mean_{j in group(i)} r_j
//   baseline = "none"  (REINFORCE++):                    a_i = r_i
//   then over the batch:  A_i = (a_i - m) / sqrt(v + 1e-8)
//
// with m and v the mean and the Bessel-corrected variance over the batch's action tokens, each
// token of rollout i holding a_i (group.ts, whitened): the convention of verl's
// compute_reinforce_plus_plus_baseline_outcome_advantage and compute_reinforce_plus_plus_outcome_
// advantage (verl/trainer/ppo/core_algos.py, masked_whiten over the response mask), where a
// singleton group's mean is taken as 0 (its reward enters the batch statistics as is; rlx follows).
// The default is the baseline variant: the paper recommends it for complex reasoning tasks with
// several samples per prompt (outcome rewards, group_size > 1) and plain REINFORCE++ for general
// RLHF with one sample per prompt. The paper also subtracts a per-token KL penalty from the reward;
// in rlx a KL term belongs to the rl loss (dppo_kl's kl_tau, [trainer.loss]; the clipping types
// have none), so a_i starts from the env's reward.
//
// "The batch" is this algorithm's rollouts in the batch being cut: they wait on a byBatch barrier
// (barriers.ts) that the env's barrier book scores at the cut, before the step's samples are built
// (src/orchestrator/groups.ts), so every advantage is set before packing. Other envs' rollouts (and
// another role's algorithm's) are normalized in their own sets. Failed rollouts never count.
// Not group-relative: with group_size 1 the baseline variant is plain REINFORCE++ and still trains.
// `overlong = { buffer = L_cache }` adds DAPO's soft overlong punishment to each reward first
// (overlong.ts).
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type AlgorithmContext, type LossComponent } from "./base.ts";
import { type BarrierSpec, byBatch } from "./barriers.ts";
import { mean, rolloutSize, whitened } from "./group.ts";
import { OverlongShaping, overlongSchema } from "./overlong.ts";
import { assignAdvantage } from "./routing.ts";
import { samplingSchema } from "./schemas.ts";

const schema = z.strictObject({
  type: z.literal("reinforce_pp"),
  sampling: samplingSchema,
  /** "group": subtract each group's mean reward first (REINFORCE++-baseline); "none": plain REINFORCE++. */
  baseline: z.enum(["group", "none"]).default("group"),
  /** DAPO's soft overlong punishment (overlong.ts); absent: off. */
  overlong: overlongSchema.optional(),
});

/** a_i: each reward minus its group's mean (a singleton's mean taken as 0, as verl), in order. */
export function groupBaselined(rewards_B: readonly number[], groupIds_B: readonly string[]): number[] {
  const groups = new Map<string, number[]>();
  groupIds_B.forEach((id, i) => groups.set(id, [...(groups.get(id) ?? []), rewards_B[i]!]));
  const means = new Map([...groups].map(([id, rewards]) => [id, rewards.length > 1 ? mean(rewards) : 0]));
  return rewards_B.map((r, i) => r - means.get(groupIds_B[i]!)!);
}

export class ReinforcePp extends Algorithm<z.infer<typeof schema>> {
  static override type = "reinforce_pp";
  static override actionLossType: LossComponent = "rl";
  static override schema = schema;
  private readonly overlong = new OverlongShaping(this.config.overlong);

  override async setup(ctx: AlgorithmContext): Promise<void> {
    this.overlong.setup(ctx);
  }

  override barriers(): BarrierSpec[] {
    return [byBatch("batch")];
  }

  override async scoreBarrier(_name: string, members: Rollout[]): Promise<void> {
    const rewards_B = this.overlong.rewards(members);
    const centered_B =
      this.config.baseline === "group"
        ? groupBaselined(
            rewards_B,
            members.map((r) => r.groupId),
          )
        : rewards_B;
    const advantages_B = whitened(
      centered_B,
      members.map((r) => rolloutSize(r).output),
    );
    members.forEach((rollout, i) => assignAdvantage(rollout, advantages_B[i]!));
  }
}

// GRPO, the default (DeepSeekMath, arXiv 2402.03300; Dr. GRPO, arXiv 2503.20783).
//
//   A_i = r_i - mean_j r_j          over the group's trainable rollouts, broadcast to every action
//                                   token of rollout i; the rl loss (DPPO + KL) consumes them.
//
// Deliberate choices (reference/prime-rl.md §2.1):
//   - no std division by default (Dr. GRPO, as prime-rl ships it); `std_normalize = true` divides
//     by the group's N-1 std + 1e-6, as DeepSeekMath and verl do (what MaxRL compares against);
//   - `length_penalty = {}` turns on the linear penalty: rewards are shaped by each rollout's share
//     of the group's largest output, input and turn counts, scaled by the mean reward, then
//     centered (so equal lengths give plain GRPO, and advantages stay zero-mean);
//   - a singleton group (group_size 1) gives advantage 0: nothing to compare against.
import type { z, ZodType } from "zod";
import { algoSchemas } from "../config/algo.ts";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type LossComponent } from "./base.ts";
import { centered, lengthShaped, rolloutSize, stdNormalized } from "./group.ts";
import { assignAdvantage } from "./routing.ts";

type GrpoConfig = z.infer<typeof algoSchemas.grpo> | z.infer<typeof algoSchemas.echo>;

export class Grpo<Config extends GrpoConfig = GrpoConfig> extends Algorithm<Config> {
  static override type = "grpo";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema: ZodType = algoSchemas.grpo;

  /** The group's scalar advantages, index i for rollout i. */
  advantages(group: Rollout[]): number[] {
    let rewards_G = group.map((r) => r.reward);
    const penalty = this.config.length_penalty;
    if (penalty) rewards_G = lengthShaped(rewards_G, group.map(rolloutSize), penalty);
    return this.config.std_normalize ? stdNormalized(rewards_G) : centered(rewards_G);
  }

  override async scoreGroup(group: Rollout[]): Promise<void> {
    const advantages_G = this.advantages(group);
    group.forEach((rollout, i) => assignAdvantage(rollout, advantages_G[i]!));
  }
}

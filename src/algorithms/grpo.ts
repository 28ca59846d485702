// GRPO, the default (DeepSeekMath, arXiv 2402.03300; Dr. GRPO, arXiv 2503.20783).
//
//   A_i = r_i - mean_j r_j          over the group's trainable rollouts, broadcast to every action
//                                   token of rollout i; the rl loss (DPPO + KL) consumes them.
//
// Deliberate choices (prime-rl's orchestrator/algo/grpo.py):
//   - no std division by default (Dr. GRPO, as prime-rl ships it); `std_normalize = true` divides
//     by the group's N-1 std + 1e-6, as DeepSeekMath and verl do (what MaxRL compares against);
//   - `length_penalty = {}` turns on the linear penalty: rewards are shaped by each rollout's share
//     of the group's largest output, input and turn counts, scaled by the mean reward, then
//     centered (so equal lengths give plain GRPO, and advantages stay zero-mean);
//   - `overlong = { buffer = L_cache }` adds DAPO's soft overlong punishment to each reward first
//     (overlong.ts; L_max defaults to the env's max_tokens);
//   - a singleton group (group_size 1) gives advantage 0: nothing to compare against.
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type AlgorithmContext, type LossComponent } from "./base.ts";
import { centered, lengthShaped, rolloutSize, stdNormalized } from "./group.ts";
import { OverlongShaping, overlongSchema } from "./overlong.ts";
import { assignAdvantage } from "./routing.ts";
import { samplingSchema } from "./schemas.ts";

const lengthPenaltySchema = z.strictObject({
  type: z.literal("linear").default("linear"),
  num_output_tokens_weight: z.number().min(0).default(0.25),
  num_input_tokens_weight: z.number().min(0).default(0.1),
  num_turns_weight: z.number().min(0).default(0.1),
});

/** GRPO's fields, shared by the algorithms built on it (echo). */
export const grpoFields = {
  sampling: samplingSchema,
  /** Divide centered rewards by the group's std (off: Dr. GRPO, as prime-rl ships it). */
  std_normalize: z.boolean().default(false),
  length_penalty: lengthPenaltySchema.optional(),
};

const schema = z.strictObject({
  type: z.literal("grpo"),
  ...grpoFields,
  /** DAPO's soft overlong punishment (overlong.ts); absent: off. */
  overlong: overlongSchema.optional(),
});
type GrpoConfig = z.infer<typeof schema>;

/** GRPO's credit for a group under `config` (GRPO's fields), assigned to each rollout's action
 * tokens; `rewards_G` (default: the rollouts' rewards) may come shaped (overlong). */
export function assignGrpoAdvantages(
  config: Pick<GrpoConfig, "std_normalize" | "length_penalty">,
  group: Rollout[],
  rewards_G: number[] = group.map((r) => r.reward),
): void {
  const penalty = config.length_penalty;
  if (penalty) rewards_G = lengthShaped(rewards_G, group.map(rolloutSize), penalty);
  const advantages_G = config.std_normalize ? stdNormalized(rewards_G) : centered(rewards_G);
  group.forEach((rollout, i) => assignAdvantage(rollout, advantages_G[i]!));
}

export class Grpo extends Algorithm<GrpoConfig> {
  static override type = "grpo";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema = schema;
  private readonly overlong = new OverlongShaping(this.config.overlong);

  override async setup(ctx: AlgorithmContext): Promise<void> {
    this.overlong.setup(ctx);
  }

  override async scoreGroup(group: Rollout[]): Promise<void> {
    assignGrpoAdvantages(this.config, group, this.overlong.rewards(group));
  }
}

// `filter`, online difficulty filtering (DAPO's dynamic sampling, arXiv 2503.14476): tasks in the
// uniform walk, and an admission gate on each finished group. A group is admitted when its rewards
// differ by more than `min_reward_spread` (max - min) and its pass rate is inside
// [min_pass_rate, max_pass_rate]; a rejected group is replaced by a fresh one, so the step still
// gets its full batch_size of useful rollouts. The bound: once the gate has rejected
// (max_oversample - 1) x batch_size rollouts of this env in one step, the groups that fill the
// step's batch are admitted ungated ("over_bound", counted), so a task set the policy cannot learn
// from costs a few times the rollouts of an ungated step before the step goes on.
import { type ZodType, z } from "zod";
import type { Rollout } from "../data/types.ts";
import { passRewardField, type Verdict } from "./base.ts";
import { Uniform } from "./uniform.ts";

const schema = z
  .strictObject({
    type: z.literal("filter"),
    ...passRewardField,
    /** Admit a group when max - min of its rewards is above this (0: any difference). */
    min_reward_spread: z.number().min(0).default(0),
    /** Admit a group whose pass rate is at least this. */
    min_pass_rate: z.number().min(0).max(1).default(0),
    /** Admit a group whose pass rate is at most this. */
    max_pass_rate: z.number().min(0).max(1).default(1),
    /** At most this many times batch_size rollouts of this env generated per step. */
    max_oversample: z.number().min(1).default(4),
  })
  .refine((c) => c.min_pass_rate <= c.max_pass_rate, {
    message: "min_pass_rate must not be above max_pass_rate",
    path: ["min_pass_rate"],
  });
export type FilterConfig = z.infer<typeof schema>;

export class Filter extends Uniform<FilterConfig> {
  static override type = "filter";
  static override schema: ZodType = schema;

  /** Whether a finished group passes the gate (ignoring the bound). */
  passes(group: readonly Rollout[]): boolean {
    const ok = group.filter((r) => !r.error);
    if (ok.length === 0) return false;
    const rewards_G = ok.map((r) => r.reward);
    const spread = Math.max(...rewards_G) - Math.min(...rewards_G);
    const passRate = ok.filter((r) => this.ctx.stats.passed(r)).length / ok.length;
    return (
      spread > this.config.min_reward_spread &&
      passRate >= this.config.min_pass_rate &&
      passRate <= this.config.max_pass_rate
    );
  }

  override admit(group: readonly Rollout[], rejected: number): Verdict {
    if (this.passes(group)) return "admit";
    return rejected + group.length > (this.config.max_oversample - 1) * this.ctx.batchSize ? "over_bound" : "reject";
  }
}

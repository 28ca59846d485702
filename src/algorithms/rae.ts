// RAE, role-conditioned advantage estimation (SPIRAL, arXiv 2506.24119; prime-rl's algo/rae.py):
// credit is a rollout's reward minus a running baseline of its role's rewards.
//
//   A = r - b_role          then   b_role <- decay b_role + (1 - decay) r       (b starts at 0)
//
// Each rollout is scored against the baseline before its own reward updates it, in the group's
// order. With decay 0.95, rewards [1, 0, 1] of one role give advantages [1, -0.05, 0.9525]. In a
// zero-sum self-play game the group mean is about 0 whatever the policy does, and centering both
// players against it mixes their opposite reward scales (a first-mover edge reads as permanent
// credit); a per-role baseline measures each role against its own usual result. A single-agent
// env (no role) is REINFORCE with an exponential-moving-average baseline.
//
// Unlike prime-rl, whose baselines live in memory and re-warm after a restart, the baselines are
// the algorithm's saved state (`algorithm/<env>` in the checkpoint): a resumed run continues them.
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type LossComponent } from "./base.ts";
import { assignAdvantage } from "./routing.ts";
import { samplingSchema } from "./schemas.ts";

const schema = z.strictObject({
  type: z.literal("rae"),
  sampling: samplingSchema,
  /** The baseline's decay per rollout of the role (SPIRAL and prime-rl: 0.95). */
  decay: z.number().min(0).max(1).default(0.95),
});

/** The role a baseline belongs to; rollouts of a single-agent env share one. */
const roleKey = (rollout: Rollout) => rollout.role ?? "";

export class Rae extends Algorithm<z.infer<typeof schema>> {
  static override type = "rae";
  static override actionLossType: LossComponent = "rl";
  static override schema = schema;
  private baselines: Record<string, number> = {};

  override async scoreGroup(group: Rollout[]): Promise<void> {
    for (const rollout of group) {
      const role = roleKey(rollout);
      const baseline = this.baselines[role] ?? 0;
      assignAdvantage(rollout, rollout.reward - baseline);
      this.baselines[role] = this.config.decay * baseline + (1 - this.config.decay) * rollout.reward;
    }
  }

  override saveState(): unknown {
    return Object.keys(this.baselines).length ? { baselines: { ...this.baselines } } : undefined;
  }

  override loadState(state: { baselines: Record<string, number> }): void {
    this.baselines = { ...state.baselines };
  }
}

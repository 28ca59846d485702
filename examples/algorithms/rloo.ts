// RLOO, REINFORCE with a leave-one-out baseline (Ahmadian et al., arXiv 2402.14740), as a custom
// rlx algorithm in one file. RLOO is also built in (`type = "rloo"`, src/algorithms/rloo.ts); this
// file is the example of the custom-algorithm form. Each rollout is compared with the mean reward
// of the OTHER rollouts of its group:
//
//   A_i = r_i - (sum_j r_j - r_i) / (G - 1)  =  G / (G - 1) * (r_i - mean r)
//
// so it is GRPO's centering scaled by G/(G-1): unbiased, because a rollout's baseline never
// includes its own reward. A group of one has no baseline, and gets advantage 0.
//
// How a custom algorithm plugs in (docs/algorithms.md): the default export receives rlx's kit
// (the Algorithm base class, zod, helpers) and returns the class. Nothing is imported from rlx at
// run time, so the file works from anywhere with the compiled binary; the `import type` line only
// gives editors the types inside this repository and is erased when the file runs (delete it
// elsewhere). Use it with:
//
//   [[orchestrator.train.env]]
//   id = "math"
//   algo = { type = "custom", path = "examples/algorithms/rloo.ts", scale = 1.0 }
import type { AlgorithmKit } from "../../src/algorithms/registry.ts";
import type { Rollout } from "../../src/data/types.ts";

interface RlooConfig {
  type: string;
  sampling: { source: "policy" | { name: string; base_url: string } };
  scale: number;
}

export default ({ Algorithm, z, assignAdvantage }: AlgorithmKit) => {
  // The algorithm's own config fields (the block minus type, path, sampling and loss), with defaults.
  const schema = z.strictObject({
    /** Multiplies every advantage (a per-env learning-rate knob). */
    scale: z.number().positive().default(1),
  });
  return class Rloo extends Algorithm<RlooConfig> {
    static override type = "rloo";
    static override actionLossType = "rl" as const;
    static override groupRelative = true;
    static override schema = schema;

    override async scoreGroup(group: Rollout[]): Promise<void> {
      const rewards_G = group.map((r) => r.reward);
      const total = rewards_G.reduce((a, b) => a + b, 0);
      const g = rewards_G.length;
      group.forEach((rollout, i) => {
        const baseline = g > 1 ? (total - rewards_G[i]!) / (g - 1) : rewards_G[i]!;
        assignAdvantage(rollout, (rewards_G[i]! - baseline) * this.config.scale);
      });
    }
  };
};

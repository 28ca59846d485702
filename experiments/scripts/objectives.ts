// The objectives that experiments/scripts/objectives.sh compares (docs/algorithms.md, "Which
// objective"): each is GRPO's advantages with one rl loss type (docs/architecture.md §6), or one
// built-in advantage estimator with the default loss, as `--set` lines over
// experiments/configs/grpo_bare.toml. objectives.sh asks this file for them, objectives_table.ts
// prints them, so an objective is defined once.
//
//   bun experiments/scripts/objectives.ts           the names, space-separated (objectives.sh's default)
//   bun experiments/scripts/objectives.ts NAME      its algorithm, then one --set value per line
import { CLIP_DEFAULTS, type RlLossType } from "../../src/data/loss_types.ts";

export interface Objective {
  name: string;
  /** orchestrator.algo.type */
  algorithm: string;
  /** The rl loss type it trains with. */
  loss: RlLossType;
  /** The --set values over experiments/configs/grpo_bare.toml. */
  delta: string[];
  /** The problem it addresses, and the paper. */
  addresses: string;
}

const lossType = (type: RlLossType, addresses: string, delta: string[] = []): Objective => ({
  name: type,
  algorithm: "grpo",
  loss: type,
  delta: [`trainer.loss.type=${type}`, ...delta],
  addresses,
});
const estimator = (algorithm: string, addresses: string): Objective => ({
  name: algorithm,
  algorithm,
  loss: "dppo_kl",
  delta: [`orchestrator.algo.type=${algorithm}`],
  addresses,
});

// gspo and gmpo name their reduction, "sequence" (their default: both are sequence-level objectives,
// docs/architecture.md §6), so the rows say it whatever the defaults become.
const BASE: Objective[] = [
  {
    name: "grpo",
    algorithm: "grpo",
    loss: "dppo_kl",
    delta: [],
    addresses:
      "the default: a trust region on each token's probability (DPPO's mask beyond 0.2 against the advantage) and a log-ratio² penalty",
  },
  lossType(
    "gspo",
    "MoE routing stability, length bias: one ratio per sample (the geometric mean of its tokens'), clipped, each sample normalized by its length (GSPO, arXiv 2507.18071)",
    ["trainer.loss.reduction=sequence"],
  ),
  lossType(
    "cispo",
    "entropy collapse, off-policy drift: no token is dropped, the importance weight is clipped and detached (MiniMax-M1, arXiv 2506.13585)",
  ),
  lossType(
    "clip_higher",
    "entropy collapse: PPO's clip with a higher upper bound, so an unlikely token's probability can grow (DAPO, arXiv 2503.14476)",
  ),
  lossType(
    "gmpo",
    "MoE routing stability, outlier ratios: the geometric mean of the token ratios, clipped in log space (GMPO, arXiv 2507.20673)",
    ["trainer.loss.reduction=sequence"],
  ),
  estimator("rloo", "variance of the baseline: each rollout's baseline is the mean of the other rollouts of its group"),
  estimator("reinforce_pp", "variance of the baseline: REINFORCE++'s advantage normalized over the batch"),
];

// The same loss types where their clips bite: in the recipe above the policy moves so little between
// sampling and training (one update per batch, rollouts at most one version old: mismatch_kl ~3e-3)
// that under 0.5% of tokens reach clip_higher's, cispo's or gmpo's range. Rollouts up to four
// versions old and a 3x learning rate move it 4-12% of tokens past clip_higher's range (a probe run,
// docs/algorithms.md "Which objective").
const STALE = ["orchestrator.max_async_level=4", "trainer.optim.lr=3e-4"];
const stale = (o: Objective): Objective => ({
  ...o,
  name: `${o.name}@stale`,
  delta: [...o.delta, ...STALE],
  addresses: `${o.name} off-policy: rollouts up to 4 versions old, lr 3e-4`,
});

export const OBJECTIVES: Objective[] = [
  ...BASE,
  ...BASE.filter((o) => ["grpo", "gspo", "cispo", "clip_higher", "gmpo"].includes(o.name)).map(stale),
];

/** "clip_low / clip_high" of a clipping type (gmpo's in log space), from its defaults; "" for the others. */
export function clipRange(type: RlLossType, range: readonly [number, number] = CLIP_DEFAULTS[type]): string {
  if (!["gspo", "cispo", "clip_higher", "gmpo"].includes(type)) return "";
  const num = (x: number) => (x !== 0 && Math.abs(x) < 0.01 ? x.toExponential() : String(x));
  return `clip ${num(range[0])} / ${num(range[1])}${type === "gmpo" ? " (log ratio)" : ""}`;
}

if (import.meta.main) {
  const name = process.argv[2];
  if (name === undefined) console.log(OBJECTIVES.map((o) => o.name).join(" "));
  else {
    const objective = OBJECTIVES.find((o) => o.name === name);
    if (!objective) {
      console.error(`objectives.ts: no objective ${name} (${OBJECTIVES.map((o) => o.name).join(", ")})`);
      process.exit(2);
    }
    console.log([objective.algorithm, ...objective.delta].join("\n"));
  }
}

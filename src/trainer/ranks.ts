// One optimizer step on one data-parallel trainer rank: what the trainer process calls
// instead of trainStep when `trainer.world_size` > 1. Every rank reads the same whole step batch,
// computes the same balanced plan (src/trainer/balance.ts) and trains only its own rows:
//
//   1. its rows' member counts, all-reduced once, before the first micro-batch: the global
//      denominators N_rl, N_ce, N_ref_kl, N_distill (and checked against the whole step's own counts, which
//      every rank can see: a mismatch means the ranks disagree on the plan);
//   2. forward + backward of its rows, gradients accumulating locally;
//   3. in the Learner's optimizer step: the gradient all-reduce (a SUM: with global denominators
//      that is the single-rank gradient), then clipping and AdamW, identical on every rank, so the
//      weights stay identical without a broadcast. A sharded model (trainer.shard) has no
//      all-reduce here: its gradients reach the slices by reduce-scatter inside the shim (the
//      train step's for "full", the optimizer step's for "optimizer"), except LoRA adapters,
//      which stay whole;
//   4. the metric sums all-reduced too, so every rank (rank 0 logs) reports the whole step.
//
// With context parallelism (trainer.context_parallel = C), ranks r C .. r C + C - 1 form data-parallel
// replica r: they train the same rows, each row split along the sequence between them in the shim
// (rlx_batch.context_group), and each writes the whole row's metrics. So the plan is over world / C
// replicas, and only a replica's first rank adds its counts and metric sums; the gradient
// all-reduce stays over every rank, each holding its own tokens' share of the gradient.
//
// The hook point is the Learner (src/trainer/step.ts): wrapping its optimizerStep keeps the step
// driver unaware of ranks, and the pure-TS and native policies alike get the same all-reduce.
import type { NativeModel, ShardMode } from "../native/model.ts";
import { RlxError } from "../errors.ts";
import { type BalanceOptions, balanceStep, type CostModel } from "./balance.ts";
import type { PackedRow, PackedStep } from "../data/pack.ts";
import { rowCounts } from "../data/pack.ts";
import {
  type Denominators,
  denominatorsOf,
  type Learner,
  type StepOptions,
  type StepResult,
  trainStep,
} from "./step.ts";

/** The collectives a rank needs (src/native/dist.ts ProcessGroup has them). */
export interface RankGroup {
  readonly rank: number;
  readonly worldSize: number;
  allreduceCounts(counts: BigInt64Array | Float64Array): void;
  allreduceGrads(model: NativeModel, bucketBytes?: number): void;
}

export interface DataParallel {
  group: RankGroup;
  /** The model whose gradients are all-reduced (the policy's). */
  model: NativeModel;
  cost: CostModel;
  balance?: BalanceOptions;
  bucketBytes?: number;
  /** trainer.shard (default "none"). */
  shard?: ShardMode;
  /** trainer.context_parallel (default 1): ranks per replica, each row split between them. */
  contextParallel?: number;
}

/** This rank's rows of a step: the same plan on every rank, its own share of it. */
export function rankRows(
  step: PackedStep,
  rank: number,
  worldSize: number,
  cost: CostModel,
  opts: BalanceOptions = {},
) {
  const plan = balanceStep(step, worldSize, cost, opts);
  return { rows: plan.ranks[rank]!, plan };
}

/** The step's denominators from this rank's rows, all-reduced over the ranks (exact int64). */
export function globalDenominators(rows: readonly PackedRow[], group: RankGroup): Denominators {
  const counts = new BigInt64Array(5);
  for (const row of rows) {
    const c = rowCounts(row);
    counts[0]! += BigInt(c.rl);
    counts[1]! += BigInt(c.ce);
    counts[2]! += BigInt(c.refKl);
    counts[3]! += BigInt(c.rlSequences);
    counts[4]! += BigInt(c.distill);
  }
  group.allreduceCounts(counts);
  const at = (i: number) => Math.max(1, Number(counts[i]!));
  return { rl: at(0), ce: at(1), refKl: at(2), rlSequences: at(3), distill: at(4) };
}

/** The policy with the gradient all-reduce in front of its optimizer step. */
export function allReducingLearner(learner: Learner, dp: DataParallel): Learner {
  return {
    trainRow: (row, numEnvs, n, loss) => learner.trainRow(row, numEnvs, n, loss),
    optimizerStep(lr, maxGradNorm) {
      if ((dp.shard ?? "none") === "none" || dp.model.lora) dp.group.allreduceGrads(dp.model, dp.bucketBytes);
      return learner.optimizerStep(lr, maxGradNorm);
    },
  };
}

/** One optimizer step of a whole step batch, this rank training its share. Collective: every
 * rank must call it with the same step. */
export function trainStepOnRank(dp: DataParallel, learner: Learner, step: PackedStep, opts: StepOptions): StepResult {
  const { rank, worldSize } = dp.group;
  const split = dp.contextParallel ?? 1;
  const replicas = worldSize / split;
  const addsCounts = rank % split === 0; // a replica's first rank
  const { rows, plan } = rankRows(step, Math.floor(rank / split), replicas, dp.cost, dp.balance);
  const denominators = globalDenominators(addsCounts ? rows : [], dp.group);
  const whole = denominatorsOf(step.rows);
  const keys = ["rl", "ce", "refKl", "distill", "rlSequences"] as const;
  if (keys.some((k) => whole[k] !== denominators[k])) {
    const list = (d: Denominators) => keys.map((k) => `${k} ${d[k]}`).join(", ");
    throw new RlxError(
      `rank ${rank} of ${worldSize}: the ranks' token counts (${list(denominators)}) ` +
        `differ from the step's (${list(whole)}): the ranks split the step differently`,
      { fix: "run the same rlx build on every rank, reading the same step file" },
    );
  }
  const reduceSums = (flat: Float64Array) => dp.group.allreduceCounts(addsCounts ? flat : flat.fill(0));
  // tokens stays the whole step's, so tokens_per_s is the step's throughput over all ranks.
  const result = trainStep(allReducingLearner(learner, dp), { ...step, rows }, { ...opts, denominators, reduceSums });
  const mean = plan.loads.reduce((a, b) => a + b, 0) / replicas;
  Object.assign(result.metrics, {
    world_size: worldSize,
    ...(split > 1 ? { context_parallel: split } : {}),
    "balance/max_over_mean": mean > 0 ? Math.max(...plan.loads) / mean : 1,
    "balance/splits": plan.splits,
    "balance/dummies": plan.dummies,
  });
  return result;
}

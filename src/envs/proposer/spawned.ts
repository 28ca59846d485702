// The proposer env with `solver_env` set: proposer-solver through the orchestrator's groups
// (docs/algorithms.md, "Roles"). The episode is the proposal alone; a valid one spawns a group of
// `solvers` rollouts of the train env `solver_env` on it (an ordinary group of that env: its
// algorithm, its credit, its tokens trained as its own), and the proposer's reward waits in the
// barrier book until they have finished (src/orchestrator/barriers.ts), when `settle` gives it:
//
//   proposer   F(p) - diversity (m - 1) / (G - 1)
//              p: the share of its spawned solvers whose reward counts as correct; F the
//                 env's `frontier` reward of it (index.ts: 4 p (1 - p), or 1 - p inside (0, 1))
//              m: how many of its group's G proposals (the proposals of one seed problem) are the
//                 same expression as its own; -1 for an invalid proposal (nothing spawned)
//
// The repetition penalty is R-Zero's (Huang et al. 2025, "R-Zero: Self-Evolving Reasoning LLM from
// Zero Data"), within one group: learnability alone lets a group's proposals collapse onto one
// expression the solvers then learn (docs/results.md §13), after which every proposal's reward is
// 0 and group-relative credit has nothing to push the proposer with.
import type { EpisodeContext, EpisodeResult, SettledReward, SpawnedOutcome, Task } from "../types.ts";
import type { Rollout } from "../../data/types.ts";
import { checkExpression } from "./expression.ts";
import { frontierReward, type ProposerArgs, proposePrompt, solvePrompt } from "./index.ts";

/** One episode: the proposal and its check; a valid one spawns its solver group. */
export async function propose(ctx: EpisodeContext, a: ProposerArgs & { solver_env: string }): Promise<EpisodeResult> {
  const reply = await ctx.turn("proposer", proposePrompt(ctx.task.info!.expression as string, a));
  const expression = reply.trim().split("\n")[0]!.replace(/=\s*$/, "").trim();
  const checked = checkExpression(expression, a.digits, a.max_ops);
  if ("error" in checked) return { rewards: { proposer: -1 }, metrics: { valid: 0 } };
  const normalized = expression.replaceAll(" ", "");
  const task: Task = {
    id: `proposal:${normalized}`,
    prompt: solvePrompt(expression, a.format),
    answer: String(checked.value),
    info: { expression: normalized },
  };
  return { rewards: {}, metrics: { valid: 1 }, spawn: { proposer: { env: a.solver_env, task, size: a.solvers } } };
}

/** Whether a spawned solver got it right: its `correct` metric, else a reward of 1. */
const solved = (outcome: SpawnedOutcome) => (outcome.metrics.correct ?? outcome.reward) >= 1;

/** The proposers' rewards once their solver groups have finished (Env.settle). */
export function settleProposals(
  group: ReadonlyArray<{ rollout: Rollout; spawned: SpawnedOutcome[] }>,
  a: Pick<ProposerArgs, "diversity" | "frontier">,
): Array<SettledReward | undefined> {
  const expressionOf = (rollout: Rollout) => (rollout.info.spawn as { task: Task } | undefined)?.task.info?.expression;
  const proposals = group.map(({ rollout }) => expressionOf(rollout)).filter((e) => e !== undefined);
  return group.map(({ rollout, spawned }): SettledReward | undefined => {
    const expression = expressionOf(rollout);
    if (expression === undefined) return undefined; // invalid: its -1 stands
    const finished = spawned.filter((o) => !o.failed);
    if (finished.length === 0) return { reward: 0, metrics: { panel: 0 } };
    const p = finished.filter(solved).length / finished.length;
    const repeats = proposals.filter((e) => e === expression).length - 1;
    const repetition = group.length > 1 ? repeats / (group.length - 1) : 0;
    return {
      reward: frontierReward(p, a.frontier) - a.diversity * repetition,
      metrics: {
        panel: finished.length,
        pass_rate: p,
        frontier: 1 - Math.abs(2 * p - 1),
        at_frontier: p > 0 && p < 1 ? 1 : 0,
        repetition,
      },
    };
  });
}

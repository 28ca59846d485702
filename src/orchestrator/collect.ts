// Steps 2-3 of the step loop (src/orchestrator/loop.ts): one batch, from its groups (drawn, run,
// admitted or replaced: groups.ts) to the samples it trains. The trainable rollouts become samples
// (routed by each env's loss component, zero advantages filtered); a batch with nothing to train
// is sampled again, and orchestrator.max_empty_batches in a row abort the run with the reason.
// Each batch's failed rollouts are recorded (rollouts/failed_step_N.jsonl) before the failure-rate
// check. Also the orchestrator's half of the step's metrics and the per-env failure warnings.
import { isTrainable, type LossComponent } from "../algorithms/base.ts";
import { groupRelativeTypes } from "../algorithms/registry.ts";
import { filterZeroAdvantage, rolloutToSamples } from "../algorithms/samples.ts";
import type { Rollout } from "../data/types.ts";
import { RlxError } from "../errors.ts";
import type { AuditInput } from "../rundir/audit.ts";
import { appendFailed } from "../rundir/failed.ts";
import type { TaskStats } from "../task_samplers/stats.ts";
import type { FailureWindow } from "./failures.ts";
import { type CollectContext, type EnvAdmission, sampleGroups } from "./groups.ts";
import type { Progress } from "./metrics/log.ts";
import { judgeMetrics, roleMetrics, rolloutMetrics } from "./metrics/rollouts.ts";
import type { TaskSampler } from "./task_sampler.ts";

/** A sample the step trains, with what its audit record names (its rollout, index and algorithm). */
export type KeptSample = Omit<AuditInput, "step">;

export interface Collected {
  groups: Rollout[][];
  kept: KeptSample[];
  filteredSamples: number;
  zeroedTokens: number;
  dropped: number;
  emptyRetries: number;
  frozenEnvs: Set<string>;
  /** Per env: the gate's and the replay's counts, summed over the step's tries. */
  admission: Map<string, EnvAdmission>;
  /** Rollouts trained again from a replay buffer. */
  replayed: Set<Rollout>;
}

/** Rollouts for step N until a batch has something to train (or max_empty_batches say it never will). */
export async function collectStep(
  step: number,
  o: CollectContext,
  sampler: TaskSampler,
  progress: Progress,
  failures: FailureWindow,
): Promise<Collected> {
  const frozenEnvs = new Set(o.envs.filter((e) => e.frozen).map((e) => e.resolved.name));
  const maxEmpty = o.config.orchestrator.max_empty_batches;
  let dropped = 0;
  const admission = new Map<string, EnvAdmission>();
  for (let empty = 0; ; empty++) {
    const sampled = await sampleGroups(step, o, sampler, progress);
    dropped += sampled.dropped;
    for (const [env, count] of sampled.admission) admission.set(env, addCounts(admission.get(env), count));
    const rollouts = sampled.groups.flat();
    if (o.runDir && o.config.log.rollouts_interval > 0)
      appendFailed(
        o.runDir,
        step,
        empty,
        rollouts.filter((r) => !sampled.replayed.has(r)),
      );
    failures.check(step, rollouts);
    const built = buildSamples(sampled.groups, o.envs, o.config.orchestrator.filter_zero_advantages, sampled.replayed);
    if (built.kept.length > 0)
      return {
        ...built,
        groups: sampled.groups,
        dropped,
        emptyRetries: empty,
        frozenEnvs,
        admission,
        replayed: sampled.replayed,
      };
    const failed = rollouts.filter((r) => r.error);
    const waiting = o.envs.reduce((n, e) => n + e.barriers.held, 0);
    const why =
      rollouts.length === 0
        ? `every rollout waits on a barrier (${waiting} waiting)`
        : failed.length === rollouts.length
          ? `every rollout failed (first error: ${failed[0]?.error})`
          : `every advantage was 0 (rewards never differed within a group: mean reward ${(rolloutMetrics(rollouts, []).reward ?? 0).toFixed(3)}, ${failed.length}/${rollouts.length} rollouts failed)`;
    if (empty + 1 >= maxEmpty) {
      throw new RlxError(
        `step ${step}: ${maxEmpty} batches in a row had nothing to train (orchestrator.max_empty_batches); the last one because ${why}`,
        {
          fix: `group-relative algorithms (${groupRelativeTypes().join(", ")}) need group_size >= 2 and rewards that differ within a group: warm the model up (rlx sft), make tasks easier (env args), check the failing endpoint, or, for a model that solves most tasks, raise orchestrator.max_empty_batches or batch_size`,
        },
      );
    }
    o.warn(`step ${step}: nothing to train in this batch (${why}); sampling again`);
  }
}

const addCounts = (a: EnvAdmission | undefined, b: EnvAdmission): EnvAdmission =>
  a
    ? {
        admitted: a.admitted + b.admitted,
        rejected: a.rejected + b.rejected,
        overBound: a.overBound + b.overBound,
        replayed: a.replayed + b.replayed,
        rejectedRollouts: a.rejectedRollouts + b.rejectedRollouts,
      }
    : b;

/** Training samples of the trainable rollouts, routed per env's algorithm, zero advantages filtered;
 * each names its task's statistics and whether it was replayed (for the audit record). */
export function buildSamples(
  groups: Rollout[][],
  envs: ReadonlyArray<{
    resolved: { name: string };
    lossType: LossComponent;
    algoName: string;
    stats?: TaskStats;
    roleAlgorithms?: ReadonlyMap<string, { lossType: LossComponent; algoName: string }>;
  }>,
  filter: boolean,
  replayed: ReadonlySet<Rollout> = new Set(),
): Pick<Collected, "kept" | "filteredSamples" | "zeroedTokens"> {
  const all: KeptSample[] = [];
  for (const rollout of groups.flat()) {
    if (!isTrainable(rollout)) continue;
    const env = envs.find((e) => e.resolved.name === rollout.env)!;
    const stat = env.stats?.get(rollout.taskId);
    const taskStats = stat && { ...stat };
    const own = rollout.role === undefined ? undefined : env.roleAlgorithms?.get(rollout.role);
    rolloutToSamples(rollout, (own ?? env).lossType).forEach((sample, sampleIndex) =>
      all.push({
        rollout,
        sample,
        sampleIndex,
        algo: (own ?? env).algoName,
        replayed: replayed.has(rollout),
        ...(taskStats ? { taskStats } : {}),
      }),
    );
  }
  if (!filter) return { kept: all, filteredSamples: 0, zeroedTokens: 0 };
  const result = filterZeroAdvantage(all.map((k) => k.sample));
  const kept = new Set(result.kept);
  return {
    kept: all.filter((k) => kept.has(k.sample)),
    filteredSamples: result.dropped,
    zeroedTokens: result.zeroedTokens,
  };
}

/** One warning per env whose rollouts failed this step: how many, and the first error. */
export function warnFailures(step: number, rollouts: Rollout[], warn: (line: string) => void): void {
  const failed = new Map<string, Rollout[]>();
  for (const r of rollouts) if (r.error) failed.set(r.env, [...(failed.get(r.env) ?? []), r]);
  for (const [env, list] of failed) {
    const total = rollouts.filter((r) => r.env === env).length;
    warn(
      `step ${step}: ${list.length}/${total} rollouts of ${env} failed (excluded from training); first: ${list[0]!.error}`,
    );
  }
}

const sampledTokens = (rollouts: Rollout[]) =>
  rollouts.reduce((n, r) => n + r.segments.reduce((m, s) => m + (s.sampled ? s.tokenIds.length : 0), 0), 0);

/** The orchestrator's half of a step's metrics line (rollout tokens per second over `seconds`). */
export function collectedMetrics(
  step: number,
  collected: Collected,
  envNames: string[],
  seconds: number,
): Record<string, number> {
  const rollouts = collected.groups.flat();
  const offPolicy = rollouts
    .filter((r) => !r.error && r.trains !== false && !collected.frozenEnvs.has(r.env))
    .map((r) => step - 1 - r.policyVersion);
  return {
    ...rolloutMetrics(rollouts, envNames),
    ...judgeMetrics(rollouts, envNames),
    ...roleMetrics(rollouts),
    // absent, not 0, when no scored rollout was sampled by the policy (all failed, or all frozen)
    ...(offPolicy.length
      ? {
          "off_policy/mean": offPolicy.reduce((a, b) => a + b, 0) / offPolicy.length,
          "off_policy/max": Math.max(...offPolicy),
        }
      : {}),
    "off_policy/dropped": collected.dropped,
    "batch/samples": collected.kept.length,
    "batch/filtered_samples": collected.filteredSamples,
    "batch/zeroed_tokens": collected.zeroedTokens,
    "batch/empty_retries": collected.emptyRetries,
    "time/rollouts": seconds,
    "throughput/rollout_tokens_per_s": seconds > 0 ? sampledTokens(rollouts) / seconds : 0,
  };
}

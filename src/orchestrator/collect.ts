// Steps 2-3 of the step loop (src/orchestrator/loop.ts): the rollouts of one batch. Groups are drawn
// (env by ratio, then the env's next task) until they hold batch_size rollouts and run all at once,
// each env with its own algorithm and sampling source: scoreRollout as each rollout finishes,
// scoreGroup once its group has. A group older than max_off_policy_steps is dropped (counted) and
// replaced. The trainable rollouts become samples (routed by each env's loss component, zero
// advantages filtered); a batch with nothing to train is sampled again, and MAX_EMPTY_BATCHES in a
// row abort the run with the reason. A failing hook fails its rollouts, as data, never the run.
import { finishGroup, finishRollout, isTrainable, type LossComponent } from "../algorithms/base.ts";
import { groupRelativeTypes } from "../algorithms/registry.ts";
import { filterZeroAdvantage, rolloutToSamples } from "../algorithms/samples.ts";
import type { ResolvedConfig } from "../config/resolve.ts";
import type { Rollout } from "../data/types.ts";
import { hashString } from "../envs/random.ts";
import { RlxError } from "../errors.ts";
import type { ChatRenderer } from "../model/render.ts";
import { runRollout } from "../rollout/driver.ts";
import type { AuditInput } from "../rundir/audit.ts";
import type { FailureWindow } from "./failures.ts";
import { type Progress, rolloutMetrics } from "./metrics.ts";
import type { Draw, TaskSampler } from "./sampler.ts";
import type { TrainEnv } from "./setup.ts";

/** What collecting a batch needs from the run. */
export interface CollectContext {
  config: ResolvedConfig;
  envs: TrainEnv[];
  renderer: ChatRenderer;
  warn: (line: string) => void;
}

/** Batches in a row with nothing to train before the run gives up. */
export const MAX_EMPTY_BATCHES = 10;

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
}

/** Rollouts for step N until a batch has something to train (or MAX_EMPTY_BATCHES say it never will). */
export async function collectStep(
  step: number,
  o: CollectContext,
  sampler: TaskSampler,
  progress: Progress,
  failures: FailureWindow,
): Promise<Collected> {
  const frozenEnvs = new Set(o.envs.filter((e) => e.frozen).map((e) => e.resolved.name));
  let dropped = 0;
  for (let empty = 0; ; empty++) {
    const sampled = await sampleGroups(step, o, sampler, progress);
    dropped += sampled.dropped;
    failures.check(step, sampled.groups.flat());
    const built = buildSamples(sampled.groups, o.envs, o.config.orchestrator.filter_zero_advantages);
    if (built.kept.length > 0) return { ...built, groups: sampled.groups, dropped, emptyRetries: empty, frozenEnvs };
    const rollouts = sampled.groups.flat();
    const failed = rollouts.filter((r) => r.error);
    const why =
      failed.length === rollouts.length
        ? `every rollout failed (first error: ${failed[0]?.error})`
        : `every advantage was 0 (rewards never differed within a group: mean reward ${(rolloutMetrics(rollouts, []).reward ?? 0).toFixed(3)}, ${failed.length}/${rollouts.length} rollouts failed)`;
    if (empty + 1 >= MAX_EMPTY_BATCHES) {
      throw new RlxError(
        `step ${step}: ${MAX_EMPTY_BATCHES} batches in a row had nothing to train; the last one because ${why}`,
        {
          fix: `group-relative algorithms (${groupRelativeTypes().join(", ")}) need group_size >= 2 and rewards that differ within a group: warm the model up (rlx sft), make tasks easier (env args), or check the failing endpoint`,
        },
      );
    }
    o.warn(`step ${step}: nothing to train in this batch (${why}); sampling again`);
  }
}

/** Groups for step N totalling at least batch_size rollouts, none of them stale. */
export async function sampleGroups(
  step: number,
  o: CollectContext,
  sampler: TaskSampler,
  progress: Progress,
): Promise<{ groups: Rollout[][]; dropped: number }> {
  const minVersion = step - 1 - o.config.orchestrator.max_off_policy_steps;
  const groups: Rollout[][] = [];
  let dropped = 0;
  let need = o.config.orchestrator.batch_size;
  while (need > 0) {
    const draws: Draw[] = [];
    let planned = 0;
    while (planned < need) {
      const draw = sampler.next();
      draws.push(draw);
      planned += draw.groupSize;
    }
    progress.grow(planned);
    for (const group of await Promise.all(draws.map((draw) => runGroup(draw, o, progress)))) {
      const env = o.envs.find((e) => e.resolved.name === group[0]!.env)!;
      const versions = group.filter((r) => r.numTurns > 0).map((r) => r.policyVersion);
      if (!env.frozen && versions.length > 0 && Math.min(...versions) < minVersion) {
        dropped += group.length;
        if (dropped >= MAX_EMPTY_BATCHES * o.config.orchestrator.batch_size) {
          throw new RlxError(
            `step ${step}: ${dropped} rollouts in a row were sampled by weights older than version ${minVersion} (max_off_policy_steps ${o.config.orchestrator.max_off_policy_steps}); the last by version ${Math.min(...versions)}`,
            {
              fix: "the policy is not serving the weights the trainer publishes: check the policy servers' logs (POST /update_weights)",
            },
          );
        }
        continue;
      }
      groups.push(group);
      need -= group.length;
    }
  }
  return { groups, dropped };
}

/** One group: group_size rollouts of one task, scored as each finishes and then as a group. */
async function runGroup(draw: Draw, o: CollectContext, progress: Progress): Promise<Rollout[]> {
  const train = o.envs.find((e) => e.resolved.name === draw.env)!;
  const env = train.resolved;
  const group = await Promise.all(
    Array.from({ length: draw.groupSize }, async (_, i) => {
      const id = `${draw.groupId}/r${i}`;
      const rollout = await runRollout({
        id,
        groupId: draw.groupId,
        envId: env.name,
        env: train.env,
        task: draw.task,
        client: train.client,
        renderer: o.renderer,
        sampling: {
          maxTokens: env.max_tokens,
          temperature: env.temperature,
          topP: 1,
          topK: 0,
          seed: hashString(`${o.config.seed}:${id}`),
        },
        maxContextTokens: o.config.orchestrator.seq_len,
      });
      await failAsData([rollout], "scoreRollout", () => finishRollout(train.algorithm, rollout));
      progress.tick();
      return rollout;
    }),
  );
  await failAsData(group, "scoreGroup", () => finishGroup(train.algorithm, group));
  return group;
}

/** Runs an algorithm hook; if it throws, the rollouts it was scoring fail (as data, not a crash). */
async function failAsData(rollouts: Rollout[], hook: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (err) {
    for (const rollout of rollouts) {
      if (rollout.error) continue;
      rollout.error = `${hook} failed: ${(err as Error).message}`;
      rollout.metrics = { ...rollout.metrics, error: 1 };
    }
  }
}

/** Training samples of the trainable rollouts, routed per env's algorithm, zero advantages filtered. */
export function buildSamples(
  groups: Rollout[][],
  envs: ReadonlyArray<{ resolved: { name: string }; lossType: LossComponent; algoName: string }>,
  filter: boolean,
): Omit<Collected, "groups" | "dropped" | "emptyRetries" | "frozenEnvs"> {
  const all: KeptSample[] = [];
  for (const rollout of groups.flat()) {
    if (!isTrainable(rollout)) continue;
    const env = envs.find((e) => e.resolved.name === rollout.env)!;
    rolloutToSamples(rollout, env.lossType).forEach((sample, sampleIndex) =>
      all.push({ rollout, sample, sampleIndex, algo: env.algoName }),
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
    .filter((r) => !r.error && !collected.frozenEnvs.has(r.env))
    .map((r) => step - 1 - r.policyVersion);
  return {
    ...rolloutMetrics(rollouts, envNames),
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

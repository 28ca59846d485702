// The Sampler base class, a task sampler (docs/task_samplers.md): one instance per train env
// decides which of the env's tasks the next group gets, whether a finished group enters the batch,
// and which stored groups are trained again. The run-level draw (which env, by `ratio`) stays in
// src/orchestrator/task_sampler.ts; the orchestrator runs the groups, keeps the per-task statistics
// (stats.ts) and calls the hooks below, in this order, for each draw of its env:
//
//   next(step)                  a task to run a fresh group of, or a stored group to replay
//   admit(group, rejected)      the admission gate on a finished fresh group (after its stats)
//   observe(group, admitted)    every finished fresh group, after the gate (e.g. keep for replay)
//
// Whatever a sampler keeps across steps (a cursor, an RNG, a buffer) is its `saveState()`: JSON,
// saved in the orchestrator's checkpoint and handed back to `loadState` on --resume, so a resumed
// run draws exactly what the killed run would have (src/orchestrator/carried.ts). A sampler never
// reads the clock or Math.random: its randomness is seeded and part of its state.
import { z, type ZodType } from "zod";
import type { Rollout, Task } from "../data/types.ts";
import type { TaskStats } from "./stats.ts";

/** Every sampler config has these (built-ins: each sampler's `schema`). */
export interface BaseSamplerConfig {
  type: string;
  /** A rollout passes when its reward is at least this (per-task pass rates, the gate, the curriculum). */
  pass_reward: number;
}

/** The field every sampler block shares, with its default. */
export const passRewardField = {
  /** A rollout passes when its reward is at least this. */
  pass_reward: z.number().default(1),
};

/** What the run's rules may ask of a sampler's config. */
export interface SamplerRunView {
  batchSize: number;
  maxOffPolicySteps: number;
}

/** A broken rule: the key under the sampler block, what is wrong, and the fix. */
export interface SamplerRuleViolation {
  key: string;
  message: string;
  fix?: string;
}

/** What one env's sampler gets from the orchestrator. */
export interface SamplerContext {
  /** The env's name (keys its shuffled walk and its metrics). */
  env: string;
  tasks: readonly Task[];
  seed: number;
  groupSize: number;
  batchSize: number;
  /** The env's per-task statistics, kept by the orchestrator (read-only here). */
  stats: TaskStats;
}

/** A sampler's answer to next(): run a fresh group of `task`, or train `replay` (a stored group) again. */
export type Pick = { task: Task } | { replay: Rollout[] };

/** The gate's verdict: "over_bound" admits a group the gate would reject, because the step's
 * over-sampling bound was reached (counted, so the metrics say the gate gave up). */
export type Verdict = "admit" | "reject" | "over_bound";

export abstract class Sampler<Config extends BaseSamplerConfig = BaseSamplerConfig> {
  /** The config `type` ("uniform", ...); custom classes name themselves here. */
  static type = "";
  /** The sampler's own config fields, defaults being the vetted setting. Built-ins validate the
   * whole block; a custom class validates the block without `type` and `path`. */
  static schema: ZodType = z.strictObject({});
  /** A rule of this sampler's config that needs the run; undefined = it holds. */
  static checkConfig(_config: any, _run: SamplerRunView): SamplerRuleViolation | undefined {
    return undefined;
  }

  constructor(
    readonly config: Config,
    protected readonly ctx: SamplerContext,
  ) {}

  /** The class's static description, readable from an instance. */
  get kind(): SamplerClass {
    return this.constructor as SamplerClass;
  }

  /** The next group of this env, drawn for `step`. */
  abstract next(step: number): Pick;

  /** The admission gate; `rejected` = this env's rollouts rejected so far this step. */
  admit(_group: readonly Rollout[], _rejected: number): Verdict {
    return "admit";
  }

  /** A finished fresh group, after the gate. */
  observe(_group: readonly Rollout[], _admitted: boolean, _step: number): void {}

  /** Numbers for this step's metrics line (`sampling/<env>/<key>`), read when the batch is cut. */
  metrics(_step: number): Record<string, number> {
    return {};
  }

  /** What outlives a step (JSON; undefined = nothing). */
  saveState(): unknown {
    return undefined;
  }

  /** Restores what saveState returned (on --resume). */
  loadState(_state: unknown): void {}
}

export type SamplerClass = (new (config: any, ctx: SamplerContext) => Sampler<any>) & {
  type: string;
  schema: ZodType;
  checkConfig(config: any, run: SamplerRunView): SamplerRuleViolation | undefined;
};

/** Whether a group's rewards differ (its group-relative credit is not all zero). Failed rollouts do not count. */
export function hasSpread(group: readonly Rollout[]): boolean {
  const rewards_G = group.filter((r) => !r.error).map((r) => r.reward);
  return rewards_G.length >= 2 && Math.max(...rewards_G) > Math.min(...rewards_G);
}

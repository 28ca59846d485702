// The orchestrator's step loop (DESIGN §10), top to bottom. For each step N:
//
//   1. Wait until the trainer has published weights N-1-L (L = min(max_async_level,
//      max_off_policy_steps)): the orchestrator never runs more than max_async_level steps ahead,
//      and it never samples what it would have to drop as stale.
//   2. Draw groups (env by ratio, then the env's next task) until they hold batch_size rollouts,
//      run them all at once, each env with its own algorithm and sampling source:
//      scoreRollout as each finishes, scoreGroup once its group has. A group older than
//      max_off_policy_steps is dropped (counted) and replaced.
//   3. Build samples, filter zero advantages, pack. A batch with nothing to train is sampled
//      again; MAX_EMPTY_BATCHES in a row abort the run with the reason.
//   4. Write batches/step_N.bin atomically (with the orchestrator's state on checkpoint steps),
//      the audit records rollouts/step_N.jsonl, and stage the step's metrics.
//   Meanwhile the WeightWatcher loads each step the trainer publishes into the policy and writes
//   the step's metrics line. The run ends when the trainer has published max_steps.
//
// A batch takes exactly the groups dispatched for it (nothing is carried over), so when batch N is
// cut nothing is buffered or in flight: the orchestrator's checkpoint state is the step number and
// the sampler's state, and a resumed run draws exactly the tasks the killed run would have drawn.
// Failures are data: a rollout whose env, tool, endpoint or algorithm hook failed carries its
// error, is excluded from training and is counted per env in the metrics.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { LossComponent } from "../config/algo.ts";
import type { ResolvedConfig, ResolvedEnv } from "../config/resolve.ts";
import { hashString } from "../envs/random.ts";
import type { Env, Task } from "../envs/types.ts";
import { RlxError } from "../errors.ts";
import type { SamplingClient } from "../inference/types.ts";
import type { ChatRenderer } from "../model/render.ts";
import { PUBLISHED_MARKER, type PublishedStep, batchPath, weightsDir } from "../trainer/process.ts";
import { type Algorithm, finishGroup, finishRollout, isTrainable } from "../algorithms/base.ts";
import { auditLine } from "../rundir/audit.ts";
import { type BatchSample, writeStepBatch } from "../rundir/step_file.ts";
import { isCheckpointStep } from "../rundir/checkpoint.ts";
import { MetricsLog, Progress, rolloutMetrics } from "./metrics.ts";
import { packStep } from "../data/pack.ts";
import type { PolicyPool } from "./policy.ts";
import type { TrainEval } from "./train_eval.ts";
import { runRollout } from "../rollout/driver.ts";
import { type Draw, type SamplerState, TaskSampler } from "./sampler.ts";
import { filterZeroAdvantage, rolloutToSamples } from "../algorithms/samples.ts";
import type { Rollout, TrainingSample } from "../data/types.ts";

/** Batches in a row with nothing to train before the run gives up. */
export const MAX_EMPTY_BATCHES = 10;

/** One train env, ready to sample from. */
export interface TrainEnv {
  resolved: ResolvedEnv;
  env: Env;
  tasks: readonly Task[];
  algorithm: Algorithm<any>;
  /** The algorithm's name in audit records (built-in type or custom class type). */
  algoName: string;
  lossType: LossComponent;
  /** The live policy's client, or the env's frozen sampling source. */
  client: SamplingClient;
  /** Rollouts from a frozen source never go stale. */
  frozen: boolean;
}

/** What the orchestrator checkpoints (inside step file N on checkpoint steps). */
export interface OrchestratorState {
  format: 1;
  /** The last step whose batch was cut. */
  step: number;
  sampler: SamplerState;
}

export interface LoopOptions {
  config: ResolvedConfig;
  runDir: string;
  envs: TrainEnv[];
  policy: PolicyPool;
  renderer: ChatRenderer;
  /** Rejects when a child process dies; every wait races it. */
  failure: Promise<never>;
  resume?: OrchestratorState;
  /** `[orchestrator.eval]`: run on the base model and on each due version the policy loads. */
  evaluator?: TrainEval;
  print: (line: string) => void;
  warn: (line: string) => void;
}

export interface LoopResult {
  summary: string;
  metrics: MetricsLog;
}

export async function runTrainLoop(o: LoopOptions): Promise<LoopResult> {
  const { config, runDir } = o;
  const orch = config.orchestrator;
  const lag = Math.min(orch.max_async_level, orch.max_off_policy_steps);
  const envNames = o.envs.map((e) => e.resolved.name);
  const sampler = new TaskSampler(
    o.envs.map((e) => ({ name: e.resolved.name, ratio: e.resolved.ratio, groupSize: e.resolved.group_size, tasks: e.tasks })),
    config.seed,
    o.resume?.sampler,
  );
  const progress = new Progress();
  const print = progress.around(o.print);
  const warn = progress.around(o.warn);
  const metrics = new MetricsLog(runDir, envNames, config.max_steps, print);
  if (o.resume) for (const step of metrics.recover(o.resume.step)) warn(`step ${step}: metrics line rebuilt from its publish marker (the run was stopped before logging it)`);
  const evaluator = o.evaluator;
  const watcher = new WeightWatcher(runDir, o.policy, o.resume?.step ?? 0, (step, published, extra) => metrics.publish(step, published, extra), async (version) =>
    evaluator?.due(version) ? evaluator.run() : {},
  );
  const failures = new FailureWindow(orch.max_failure_rate);
  const guard = <T>(work: Promise<T>) => Promise.race([work, o.failure]);
  for (const dir of ["batches", "rollouts"]) mkdirSync(join(runDir, dir), { recursive: true });

  try {
    if (evaluator && !o.resume) metrics.note(0, await guard(evaluator.run()));
    for (let step = (o.resume?.step ?? 0) + 1; step <= config.max_steps; step++) {
      // 1. the async bound
      const gateStart = performance.now();
      await guard(watcher.waitFor(step - 1 - lag));
      const waitForPolicy = (performance.now() - gateStart) / 1000;

      // 2-3. rollouts, scored, until the batch has something to train
      const rolloutStart = performance.now();
      progress.start(`step ${step}`, 0);
      const collected = await guard(collectStep(step, { ...o, warn }, sampler, progress, failures));
      progress.stop();
      const rolloutSeconds = (performance.now() - rolloutStart) / 1000;

      // 4. pack, write the step file (with this step's metrics, and the state the checkpoint of
      //    this step needs), and the audit records
      const packStart = performance.now();
      const packed = packStep(collected.kept.map((k) => k.sample), { seqLen: orch.seq_len });
      const versions = new Map(collected.groups.flat().map((r) => [r.id, r.policyVersion]));
      const rows = packed.rows.map((row) => ({ ...row, samples: row.samples.map((s): BatchSample => ({ ...s, policyVersion: versions.get(s.rolloutId) ?? -1 })) }));
      const state: OrchestratorState | undefined = isCheckpointStep(step, config) ? { format: 1, step, sampler: sampler.snapshot() } : undefined;
      const stepMetrics = {
        ...collectedMetrics(step, collected, envNames),
        "batch/rows": packed.rows.length,
        "batch/truncated_samples": packed.truncatedSamples,
        "time/wait_for_policy": waitForPolicy,
        "time/rollouts": rolloutSeconds,
        "time/pack": (performance.now() - packStart) / 1000,
        "throughput/rollout_tokens_per_s": rolloutSeconds > 0 ? sampledTokens(collected.groups.flat()) / rolloutSeconds : 0,
      };
      writeStepBatch(batchPath(runDir, step), { step, packed: { ...packed, rows }, metrics: stepMetrics, ...(state ? { state } : {}) });
      const auditEvery = config.log.rollouts_interval;
      if (auditEvery > 0 && step % auditEvery === 0) writeAudit(runDir, step, collected.kept);
      warnFailures(step, collected.groups.flat(), warn);
    }
    // the run is over when the trainer has published the last step
    await guard(watcher.waitFor(config.max_steps));
  } finally {
    progress.stop();
    watcher.stop();
  }
  return { summary: metrics.summary(), metrics };
}

const sampledTokens = (rollouts: Rollout[]) => rollouts.reduce((n, r) => n + r.segments.reduce((m, s) => m + (s.sampled ? s.tokenIds.length : 0), 0), 0);

/** The orchestrator's half of a step's metrics line. */
function collectedMetrics(step: number, collected: Collected, envNames: string[]): Record<string, number> {
  const rollouts = collected.groups.flat();
  const offPolicy = rollouts.filter((r) => !r.error && !collected.frozenEnvs.has(r.env)).map((r) => step - 1 - r.policyVersion);
  return {
    ...rolloutMetrics(rollouts, envNames),
    "off_policy/mean": offPolicy.length ? offPolicy.reduce((a, b) => a + b, 0) / offPolicy.length : 0,
    "off_policy/max": offPolicy.length ? Math.max(...offPolicy) : 0,
    "off_policy/dropped": collected.dropped,
    "batch/samples": collected.kept.length,
    "batch/filtered_samples": collected.filteredSamples,
    "batch/zeroed_tokens": collected.zeroedTokens,
    "batch/empty_retries": collected.emptyRetries,
  };
}

interface KeptSample {
  rollout: Rollout;
  sample: TrainingSample;
  sampleIndex: number;
  algo: string;
}

interface Collected {
  groups: Rollout[][];
  kept: KeptSample[];
  filteredSamples: number;
  zeroedTokens: number;
  dropped: number;
  emptyRetries: number;
  frozenEnvs: Set<string>;
}

/** Rollouts for step N until a batch has something to train (or MAX_EMPTY_BATCHES say it never will). */
async function collectStep(step: number, o: LoopOptions, sampler: TaskSampler, progress: Progress, failures: FailureWindow): Promise<Collected> {
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
    const why = failed.length === rollouts.length
      ? `every rollout failed (first error: ${failed[0]?.error})`
      : `every advantage was 0 (rewards never differed within a group: mean reward ${(rolloutMetrics(rollouts, []).reward ?? 0).toFixed(3)}, ${failed.length}/${rollouts.length} rollouts failed)`;
    if (empty + 1 >= MAX_EMPTY_BATCHES) {
      throw new RlxError(`step ${step}: ${MAX_EMPTY_BATCHES} batches in a row had nothing to train; the last one because ${why}`, {
        fix: "group-relative algorithms (grpo, max_rl, echo) need group_size >= 2 and rewards that differ within a group: warm the model up (rlx sft), make tasks easier (env args), or check the failing endpoint",
      });
    }
    o.warn(`step ${step}: nothing to train in this batch (${why}); sampling again`);
  }
}

/** Batches in the failure-rate window. */
const FAILURE_WINDOW = 5;

/** The failed share of the rollouts of the last FAILURE_WINDOW batches; past the limit the run stops. */
export class FailureWindow {
  private readonly batches: Array<{ failed: number; total: number; first: Map<string, string> }> = [];

  constructor(private readonly maxRate: number) {}

  check(step: number, rollouts: Rollout[]): void {
    const first = new Map<string, string>();
    for (const r of rollouts) if (r.error && !first.has(r.env)) first.set(r.env, r.error);
    this.batches.push({ failed: rollouts.filter((r) => r.error).length, total: rollouts.length, first });
    if (this.batches.length > FAILURE_WINDOW) this.batches.shift();
    const failed = this.batches.reduce((n, b) => n + b.failed, 0);
    const total = this.batches.reduce((n, b) => n + b.total, 0);
    if (total === 0 || failed / total <= this.maxRate) return;
    const errors = new Map(this.batches.flatMap((b) => [...b.first]));
    throw new RlxError(
      `step ${step}: ${failed} of the last ${total} rollouts failed (${((100 * failed) / total).toFixed(0)}%, more than orchestrator.max_failure_rate = ${this.maxRate}); ${[...errors].map(([env, error]) => `${env}: ${error}`).join("; ")}`,
      { fix: "fix what the errors name (an endpoint down, a context limit, an env bug), or raise orchestrator.max_failure_rate to train through it" },
    );
  }
}

/** Groups for step N totalling at least batch_size rollouts, none of them stale. */
export async function sampleGroups(step: number, o: LoopOptions, sampler: TaskSampler, progress: Progress): Promise<{ groups: Rollout[][]; dropped: number }> {
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
          throw new RlxError(`step ${step}: ${dropped} rollouts in a row were sampled by weights older than version ${minVersion} (max_off_policy_steps ${o.config.orchestrator.max_off_policy_steps}); the last by version ${Math.min(...versions)}`, {
            fix: "the policy is not serving the weights the trainer publishes: check the policy servers' logs (POST /update_weights)",
          });
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
async function runGroup(draw: Draw, o: LoopOptions, progress: Progress): Promise<Rollout[]> {
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
        sampling: { maxTokens: env.max_tokens, temperature: env.temperature, topP: 1, topK: 0, seed: hashString(`${o.config.seed}:${id}`) },
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
export function buildSamples(groups: Rollout[][], envs: ReadonlyArray<{ resolved: { name: string }; lossType: LossComponent; algoName: string }>, filter: boolean): Omit<Collected, "groups" | "dropped" | "emptyRetries" | "frozenEnvs"> {
  const all: KeptSample[] = [];
  for (const rollout of groups.flat()) {
    if (!isTrainable(rollout)) continue;
    const env = envs.find((e) => e.resolved.name === rollout.env)!;
    rolloutToSamples(rollout, env.lossType).forEach((sample, sampleIndex) => all.push({ rollout, sample, sampleIndex, algo: env.algoName }));
  }
  if (!filter) return { kept: all, filteredSamples: 0, zeroedTokens: 0 };
  const result = filterZeroAdvantage(all.map((k) => k.sample));
  const kept = new Set(result.kept);
  return { kept: all.filter((k) => kept.has(k.sample)), filteredSamples: result.dropped, zeroedTokens: result.zeroedTokens };
}

/** One warning per env whose rollouts failed this step: how many, and the first error. */
function warnFailures(step: number, rollouts: Rollout[], warn: (line: string) => void): void {
  const failed = new Map<string, Rollout[]>();
  for (const r of rollouts) if (r.error) failed.set(r.env, [...(failed.get(r.env) ?? []), r]);
  for (const [env, list] of failed) {
    const total = rollouts.filter((r) => r.env === env).length;
    warn(`step ${step}: ${list.length}/${total} rollouts of ${env} failed (excluded from training); first: ${list[0]!.error}`);
  }
}

/** rollouts/step_N.jsonl: the audit record of every trained sample (docs/algorithms.md). */
export function writeAudit(runDir: string, step: number, kept: KeptSample[]): void {
  const path = join(runDir, "rollouts", `step_${step}.jsonl`);
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, kept.map((k) => auditLine({ step, algo: k.algo, rollout: k.rollout, sample: k.sample, sampleIndex: k.sampleIndex })).join(""));
  renameSync(tmp, path);
}

/**
 * Watches `weights/step_N/published.json` markers: hands each step's trainer metrics to
 * `onPublished` (in step order) and moves the policy to the newest published weights.
 */
export class WeightWatcher {
  private published: number;
  private readonly waiters: Array<{ version: number; resolve: () => void; reject: (err: Error) => void }> = [];
  private readonly timer: ReturnType<typeof setInterval>;
  private busy = false;
  private error: Error | undefined;

  constructor(
    private readonly runDir: string,
    private readonly policy: PolicyPool,
    start: number,
    private readonly onPublished: (step: number, published: PublishedStep, extra: Record<string, number>) => void,
    /** Runs once the policy serves a new version, before any newer one is loaded (the eval). */
    private readonly afterLoad: (version: number) => Promise<Record<string, number>>,
    pollMs = 25,
  ) {
    this.published = start;
    this.timer = setInterval(() => void this.poll(), pollMs);
  }

  /** Resolves once weights `version` (or newer) are published and loaded into the policy. */
  waitFor(version: number): Promise<void> {
    if (this.error) return Promise.reject(this.error);
    if (this.published >= version) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ version, resolve, reject }));
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async poll(): Promise<void> {
    if (this.busy || this.error) return;
    this.busy = true;
    try {
      const markers: PublishedStep[] = [];
      for (let step = this.published + 1; existsSync(join(weightsDir(this.runDir, step), PUBLISHED_MARKER)); step++) {
        markers.push(JSON.parse(readFileSync(join(weightsDir(this.runDir, step), PUBLISHED_MARKER), "utf8")) as PublishedStep);
      }
      const newest = markers.at(-1);
      if (!newest) return;
      const reloadStart = performance.now();
      await this.policy.load(resolve(weightsDir(this.runDir, newest.step)), newest.step);
      const reloadSeconds = (performance.now() - reloadStart) / 1000;
      this.published = newest.step;
      const extra = { "time/reload": reloadSeconds, ...(await this.afterLoad(newest.step)) };
      for (const marker of markers) this.onPublished(marker.step, marker, marker === newest ? extra : {});
      for (const waiter of this.waiters.splice(0)) {
        if (this.published >= waiter.version) waiter.resolve();
        else this.waiters.push(waiter);
      }
    } catch (err) {
      this.error = err as Error;
      for (const waiter of this.waiters.splice(0)) waiter.reject(this.error);
    } finally {
      this.busy = false;
    }
  }
}

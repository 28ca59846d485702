// The orchestrator's step loop (docs/architecture.md, "The step loop"), top to bottom. For each
// step N:
//
//   1. Wait until the trainer has published weights N-1-L (L = min(max_async_level,
//      max_off_policy_steps)): the orchestrator never runs more than max_async_level steps ahead,
//      and it never samples what it would have to drop as stale.
//   2-3. Collect the batch's groups, scored by each env's algorithm and admitted by its sampler
//      (groups.ts), until it has something to train (collect.ts).
//   4. Pack (each sample's rl loss a code into the run's loss table, loss_table.ts), write
//      batches/step_N.bin atomically (with the orchestrator's state, which the
//      checkpoint of this step holds), the audit records rollouts/step_N.jsonl, and stage the step's metrics.
//   Meanwhile the WeightWatcher loads each step the trainer publishes into the policy and writes
//   the step's metrics line. The run ends when the trainer has published max_steps.
//
// When batch N is cut nothing is in flight: what outlives the step (the draw's RNG and the groups
// drawn ahead for the next step, each env's task statistics, sampler state and replay buffer,
// each algorithm's own state) is registered in one CarriedState (carried.ts), saved in every
// step file (the trainer may checkpoint any step), and a resumed run draws exactly what the killed run would have drawn.
// Failures are data: a rollout whose env, tool, endpoint or algorithm hook failed carries its
// error, is excluded from training and is counted per env in the metrics.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { packStep } from "../data/pack.ts";
import type { ChatRenderer } from "../model/render.ts";
import { writeAudit } from "../rundir/audit.ts";
import { TensorBoardLog } from "../rundir/tensorboard.ts";
import { batchPath } from "../rundir/paths.ts";
import { type BatchSample, writeStepBatch } from "../rundir/step_file.ts";
import { collectedMetrics, collectStep, warnFailures } from "./collect.ts";
import { FailureWindow } from "./failures.ts";
import { lossTable } from "./loss_table.ts";
import { MetricsLog, Progress } from "./metrics/log.ts";
import type { LivePolicy } from "../processes/live_policy.ts";
import { taskSamplerState } from "./task_sampler.ts";
import { taskSamplerMetrics } from "./metrics/task_sampling.ts";
import type { TrainEnv } from "./setup.ts";
import type { TrainEval } from "./train_eval.ts";
import { HubSync } from "./hub_sync.ts";
import { WeightWatcher } from "./weight_watcher.ts";

/** How long an error waits for a child's death to be reported (children.ts takes up to 2 s for its output). */
const CHILD_REPORT_GRACE_MS = 3000;

/** What the orchestrator checkpoints (inside every step file N: any step may be checkpointed). */
export interface OrchestratorState {
  format: 2;
  /** The last step whose batch was cut. */
  step: number;
  /** Everything that outlives a step, by key (carried.ts). */
  carried: Record<string, unknown>;
}

export interface LoopOptions {
  config: ResolvedConfig;
  runDir: string;
  envs: TrainEnv[];
  policy: LivePolicy;
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
  const losses = lossTable(config);
  const { sampler, carried } = taskSamplerState(o.envs, config.seed, config.max_steps);
  if (o.resume) carried.load(o.resume.carried, `the checkpoint of step ${o.resume.step}`);
  const progress = new Progress();
  const print = progress.around(o.print);
  const warn = progress.around(o.warn);
  const tracker = config.log.tensorboard ? TensorBoardLog.open(runDir, warn) : undefined;
  const metrics = new MetricsLog(runDir, envNames, config.max_steps, print, tracker);
  if (o.resume)
    for (const step of metrics.recover(o.resume.step))
      warn(`step ${step}: metrics line rebuilt from its publish marker (the run was stopped before logging it)`);
  const evaluator = o.evaluator;
  const hub = HubSync.open(config, runDir, print, warn);
  const watcher = new WeightWatcher(
    runDir,
    o.policy,
    o.resume?.step ?? 0,
    (step, published, extra) => {
      metrics.publish(step, published, extra);
      hub?.published(step);
    },
    async (version) => (evaluator?.due(version) ? evaluator.run() : {}),
  );
  const failures = new FailureWindow(orch.max_failure_rate);
  // A child's death also fails what was talking to it (a policy server's reload, its completions):
  // such an error waits a moment for the death to be reported, which is the error that counts (it
  // names the child, and ckpt.max_restarts restarts for it).
  const guard = <T>(work: Promise<T>) =>
    Promise.race([
      work.catch(async (err: unknown) => {
        await Promise.race([o.failure, Bun.sleep(CHILD_REPORT_GRACE_MS)]);
        throw err;
      }),
      o.failure,
    ]);
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
      const packed = packStep(
        collected.kept.map((k) => k.sample),
        { seqLen: orch.seq_len, sharePrefixes: orch.share_prefixes, lossCodes: losses.codes },
      );
      const versions = new Map(collected.groups.flat().map((r) => [r.id, r.policyVersion]));
      const rows = packed.rows.map((row) => ({
        ...row,
        samples: row.samples.map((s): BatchSample => ({ ...s, policyVersion: versions.get(s.rolloutId) ?? -1 })),
      }));
      // every step carries it: a SIGTERM may ask the trainer to checkpoint any step
      const state: OrchestratorState = { format: 2, step, carried: carried.save() };
      const stepMetrics = {
        ...collectedMetrics(step, collected, envNames, rolloutSeconds),
        ...taskSamplerMetrics(step, collected, o.envs, sampler.pending),
        "batch/rows": packed.rows.length,
        "batch/truncated_samples": packed.truncatedSamples,
        "batch/shared_tokens": packed.sharedTokens,
        "time/wait_for_policy": waitForPolicy,
        "time/pack": (performance.now() - packStart) / 1000,
      };
      writeStepBatch(batchPath(runDir, step), {
        step,
        packed: { ...packed, rows, losses: losses.losses },
        metrics: stepMetrics,
        state,
      });
      const auditEvery = config.log.rollouts_interval;
      if (auditEvery > 0 && step % auditEvery === 0) writeAudit(runDir, step, collected.kept);
      tracker?.rollouts(step, collected.groups.flat());
      warnFailures(step, collected.groups.flat(), warn);
    }
    // the run is over when the trainer has published the last step (and [hub] has pushed it)
    await guard(watcher.waitFor(config.max_steps));
    await hub?.finished();
  } finally {
    progress.stop();
    watcher.stop();
  }
  return { summary: metrics.summary(), metrics };
}

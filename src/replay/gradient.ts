// `rlx replay RUN --step N --gradient` (docs/run-directory.md, "Replaying a step"): the trainer's
// steps recomputed after the fact and compared with what the run recorded. From the newest whole
// checkpoint before step N (or the run's starting model and a fresh optimizer, when none is
// older), the run's own trainer (`rlx trainer`, its ranks started as `rlx train` starts them, with
// the run's config.resolved.toml) trains steps K+1..N again from the run's kept step files, in a
// scratch run directory (RUN/replay/step_N), publishing each step's weights; each of those steps
// whose weights the run kept is then compared with them, tensor by tensor (compare.ts), and so is
// the checkpoint it started from, with the weights the run published at that step. A run
// whose trainer was deterministic gives back the same bits on the same machine; the first step and
// tensor that differ are where to look when it does not.
//
// What it needs the run to have kept (`ckpt.keep_steps = true`, or the files are gone): the step
// files K+1..N and the published weights of the steps compared (with inference.weight_transfer =
// "c10d", weights are written only every inference.publish_every steps: those are the ones
// compared). A missing one is an error naming the file and the setting.
import { existsSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadConfig, resolvedToml } from "../config/load.ts";
import type { ResolvedConfig } from "../config/resolve.ts";
import { RlxError } from "../errors.ts";
import { Children } from "../processes/children.ts";
import { planLaunch } from "../processes/trainer_ranks.ts";
import { latestCheckpoint, openCheckpoint } from "../rundir/checkpoint.ts";
import { batchPath, checkpointDir, weightsDir, writeFileAtomic } from "../rundir/paths.ts";
import { compareWeights, type WeightsComparison } from "./compare.ts";

export interface StepReplay {
  step: number;
  /** "trained": the replay's weights after this step; "checkpoint": the checkpoint it started from
   * (its weights against those the run published at that step: a damaged start shows here). */
  what: "trained" | "checkpoint";
  comparison: WeightsComparison;
}

export interface GradientReplay {
  run: string;
  /** The checkpoint the replay started from (0: the run's starting model). */
  from: number;
  step: number;
  ranks: number;
  /** The steps compared (those whose weights the run kept), in order. */
  steps: StepReplay[];
  /** The first step whose weights differ, if any. */
  firstDiffering?: number;
  seconds: number;
}

const KEEP_FIX = "run with ckpt.keep_steps = true (the trainer deletes step files and prunes weights otherwise)";

/** The scratch run's config: the run's, every rank started on this machine, each step's weights
 * written to disk and no checkpoint before the last. */
function replayConfig(config: ResolvedConfig, step: number): ResolvedConfig {
  return {
    ...config,
    max_steps: step,
    trainer: {
      ...config.trainer,
      dist: { ...config.trainer.dist, launcher: "rlx", local_ranks: [], master_addr: "127.0.0.1", master_port: 0 },
    },
    inference: { ...config.inference, weight_transfer: "disk" },
    ckpt: { ...config.ckpt, interval: 0, keep: 1, keep_steps: true, max_restarts: 0 },
    hub: { ...config.hub, repo: undefined },
  };
}

export async function replayGradient(
  run: string,
  step: number,
  log: (line: string) => void = () => {},
): Promise<GradientReplay> {
  const runDir = resolve(run);
  const configPath = join(runDir, "config.resolved.toml");
  if (!existsSync(configPath))
    throw new RlxError(`${runDir} is not a run directory: it has no config.resolved.toml`, {
      fix: "pass the output_dir of an rlx train run",
    });
  const { config } = loadConfig(configPath);
  if (!Number.isInteger(step) || step < 1 || step > config.max_steps)
    throw new RlxError(`--step ${step}: the run trains steps 1..${config.max_steps}`, {
      fix: "pass a step the run trained",
    });
  const from = latestCheckpoint(runDir, (line) => log(`replay: ${line}`), step)?.step ?? 0;
  for (let k = from + 1; k <= step; k++)
    if (!existsSync(batchPath(runDir, k)))
      throw new RlxError(
        `${batchPath(runDir, k)} is gone: replaying step ${step} from ${from ? `checkpoint ${from}` : "the start"} needs the step files ${from + 1}..${step}`,
        { fix: KEEP_FIX },
      );
  const compared = Array.from({ length: step - from }, (_, i) => from + 1 + i).filter((k) =>
    existsSync(weightsDir(runDir, k)),
  );
  if (!compared.includes(step))
    throw new RlxError(`${weightsDir(runDir, step)} is gone: there is nothing to compare step ${step} with`, {
      fix: KEEP_FIX,
    });

  const scratch = join(runDir, "replay", `step_${step}`);
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(join(scratch, "batches"), { recursive: true });
  for (let k = from + 1; k <= step; k++) symlinkSync(batchPath(runDir, k), batchPath(scratch, k));
  const replayed = replayConfig(config, step);
  writeFileAtomic(join(scratch, "config.resolved.toml"), resolvedToml(replayed));

  const started = performance.now();
  log(
    `replay: steps ${from + 1}..${step} of ${runDir} from ${from ? `checkpoint ${from}` : "the start"}, ${config.trainer.world_size} rank(s)`,
  );
  const children = new Children(join(scratch, "logs"));
  const launch = planLaunch(replayed, {
    runDir: scratch,
    policyProcesses: 0,
    ...(from ? { resumeFrom: checkpointDir(runDir, from) } : {}),
  });
  const trainers = launch.trainers.map((spec) => children.spawn(spec));
  try {
    await Promise.race([Promise.all(trainers.map((c) => c.proc.exited)), children.failure]);
  } finally {
    await children.stopAll();
  }
  const steps: StepReplay[] = [];
  const start = from > 0 ? openCheckpoint(checkpointDir(runDir, from)) : undefined;
  if (start && !start.sharded && existsSync(weightsDir(runDir, from)))
    steps.push({
      step: from,
      what: "checkpoint",
      comparison: compareWeights(weightsDir(runDir, from), start.modelDir),
    });
  for (const k of compared)
    steps.push({ step: k, what: "trained", comparison: compareWeights(weightsDir(runDir, k), weightsDir(scratch, k)) });
  // the trainers' logs stay; the weights and the checkpoint they wrote are compared and done with
  for (const sub of ["weights", "checkpoints", "batches"]) rmSync(join(scratch, sub), { recursive: true, force: true });
  const firstDiffering = steps.find((s) => s.comparison.differing.length > 0)?.step;
  return {
    run: runDir,
    from,
    step,
    ranks: config.trainer.world_size,
    steps,
    ...(firstDiffering !== undefined ? { firstDiffering } : {}),
    seconds: (performance.now() - started) / 1000,
  };
}

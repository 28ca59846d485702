// `rlx train` as a whole (docs/architecture.md §2): prepares the run directory (fresh, or rewound to a
// checkpoint for --resume), writes config.resolved.toml, starts the policy (spawned `rlx serve
// --policy` servers, external ones, or in-process), sets up every train env and its algorithm,
// starts the trainer (`rlx trainer`, one per data-parallel rank: src/processes/trainer_ranks.ts), and
// runs the step loop in this process. Children are stopped on every way out: the end of the run,
// an error, Ctrl-C, or one of them dying (a trainer rank included: the error names it).
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { loadConfig, resolvedToml } from "../config/load.ts";
import { loadCustomEnvs } from "../config/custom_envs.ts";
import type { ResolvedConfig } from "../config/resolve.ts";
import { ConfigError, RlxError } from "../errors.ts";
import { ChatRenderer } from "../model/render.ts";
import { Tokenizer } from "../model/tokenizer.ts";
import { resumePath, writeFileAtomic } from "../rundir/paths.ts";
import {
  type LoadedCheckpoint,
  latestCheckpoint,
  openCheckpoint,
  readCheckpoint,
  rewindRunDir,
} from "../rundir/checkpoint.ts";
import { Children } from "../processes/children.ts";
import { launchLine, planLaunch } from "../processes/trainer_ranks.ts";
import { type LoopResult, type OrchestratorState, runTrainLoop } from "./loop.ts";
import { MetricsLog } from "./metrics/log.ts";
import type { LivePolicy } from "../processes/live_policy.ts";
import { LaggedCopies } from "../processes/lagged_policy.ts";
import { type InferenceMode, startPolicy } from "../processes/policy_start.ts";
import { planChannels } from "../processes/weight_channels.ts";
import { setupTrainEnvs } from "./setup.ts";
import { TrainEval } from "./train_eval.ts";

export interface TrainOptions {
  configPath: string;
  overrides: string[];
  /** Continue the run in output_dir from its newest whole checkpoint. */
  resume?: boolean;
  /** Continue from this checkpoint directory (of this run or another). */
  resumeFrom?: string;
  /**
   * Continue from the run's newest whole checkpoint when it has one; else start (from resumeFrom
   * when given) over what an attempt without a checkpoint left: a job script run again, a restart.
   */
  resumeIfAny?: boolean;
  /** Delete a previous run in output_dir and start fresh. */
  force?: boolean;
  /** Where the policy runs when [inference] names no base_urls: spawned servers or this process. */
  inference?: InferenceMode;
  print: (line: string) => void;
  info: (line: string) => void;
  warn: (line: string) => void;
}

export interface TrainResult extends LoopResult {
  runDir: string;
  config: ResolvedConfig;
}

/** How long a SIGTERM waits for the trainer's checkpoint before SIGKILL (schedulers give ~30 s). */
const SIGTERM_GRACE_MS = 25_000;

const RUN_FILES = ["metrics.jsonl", "batches", "weights", "checkpoints", "rollouts", "tensorboard"];

/** Deletes what a run trained and wrote (not its logs/), or only the `created` ones: an attempt
 * with no checkpoint starts over (--resume-if-any), and a start that fails before its loop removes
 * what it made, so a rerun needs no --force. */
function clearRunFiles(runDir: string, created = RUN_FILES): void {
  for (const name of created) rmSync(join(runDir, name), { recursive: true, force: true });
}

/** The run files that exist now (before the start, to know what it created). */
const presentRunFiles = (runDir: string) => RUN_FILES.filter((name) => existsSync(join(runDir, name)));

/** Resolves what to continue from, and makes the run directory match it. */
function prepareRunDir(runDir: string, o: TrainOptions): LoadedCheckpoint | undefined {
  if (o.resumeIfAny) {
    const latest = latestCheckpoint(runDir, o.warn);
    if (latest) {
      rewindRunDir(runDir, latest.step);
      return openCheckpoint(latest.dir); // latestCheckpoint verified it
    }
    clearRunFiles(runDir);
  }
  const holdsRun = RUN_FILES.some((name) => existsSync(join(runDir, name)));
  if (o.resume || o.resumeFrom) {
    let checkpoint: LoadedCheckpoint;
    if (o.resumeFrom) checkpoint = readCheckpoint(resolve(o.resumeFrom));
    else {
      const latest = latestCheckpoint(runDir, o.warn);
      if (!latest) {
        throw new ConfigError(`--resume: ${runDir} has no whole checkpoint to continue from`, {
          fix: "checkpoints are written every ckpt.interval steps (and at the end); start fresh without --resume, or use --resume-from DIR",
        });
      }
      checkpoint = openCheckpoint(latest.dir); // latestCheckpoint verified it
    }
    const ownRun = !relative(join(runDir, "checkpoints"), checkpoint.dir).startsWith("..");
    if (ownRun) rewindRunDir(runDir, checkpoint.step);
    else if (holdsRun) {
      throw new ConfigError(`--resume-from: output_dir ${runDir} already holds another run`, {
        fix: "give the resumed run its own output_dir (--set output_dir=...)",
      });
    }
    return checkpoint;
  }
  if (holdsRun) {
    if (!o.force) {
      throw new ConfigError(`output_dir ${runDir} already holds a run`, {
        fix: "continue it with --resume, start over with --force (deletes it), or pick another output_dir (--set output_dir=...)",
      });
    }
    rmSync(runDir, { recursive: true, force: true });
  }
  return undefined;
}

/** The orchestrator state of a checkpoint, a format-1 one (before samplers) read as uniform samplers' state. */
export function orchestratorState(
  checkpoint: Pick<LoadedCheckpoint, "dir" | "step" | "orchestratorState">,
): OrchestratorState {
  const state = checkpoint.orchestratorState as { format?: number; step?: number; carried?: object; sampler?: any };
  // format 1 (before samplers were pluggable) held the uniform walk's cursors, the RNG, the counter
  if (state?.format === 1 && state.step === checkpoint.step && state.sampler) {
    const { cursors, rng, groups } = state.sampler as { cursors: Record<string, number>; rng: number; groups: number };
    const carried: Record<string, unknown> = { draws: { rng, groups } };
    for (const [env, cursor] of Object.entries(cursors)) carried[`sampler/${env}`] = { cursor };
    return { format: 2, step: state.step, carried };
  }
  if (state?.format !== 2 || state.step !== checkpoint.step || typeof state.carried !== "object") {
    throw new RlxError(`${checkpoint.dir}/orchestrator.json is not an orchestrator state of step ${checkpoint.step}`, {
      fix: "resume from another checkpoint",
    });
  }
  return state as OrchestratorState;
}

/**
 * Where the policy runs. A deterministic run keeps it in this process: a spawned server batches
 * requests as they arrive over HTTP, so which sequences share a forward (and its rounding)
 * would depend on timing; in-process, arrival order is the event loop's and the same every run.
 */
function policyMode(config: ResolvedConfig, requested: InferenceMode): InferenceMode {
  if (!config.deterministic) return requested;
  if (requested === "spawn")
    throw new ConfigError("--inference spawn: a deterministic run keeps the policy in this process", {
      fix: "drop --inference spawn, or set deterministic = false",
    });
  return "in-process";
}

export async function runTraining(o: TrainOptions): Promise<TrainResult> {
  const { config, warnings } = loadConfig(o.configPath, o.overrides);
  for (const warning of warnings) o.warn(warning);
  const source = o.overrides.length ? `${o.configPath} (with --set)` : o.configPath;
  await loadCustomEnvs(config, source);
  const runDir = resolve(config.output_dir);
  const checkpoint = prepareRunDir(runDir, o);
  const before = presentRunFiles(runDir);
  // a start that fails (or is stopped) before its loop removes the run files it made
  const undoStart = () =>
    clearRunFiles(
      runDir,
      RUN_FILES.filter((name) => !before.includes(name)),
    );
  const resumeState = checkpoint && orchestratorState(checkpoint);
  if (resumeState && resumeState.step >= config.max_steps) {
    // killed after its last checkpoint: only metrics lines may be missing
    const metrics = new MetricsLog(
      runDir,
      config.orchestrator.train.env.map((e) => e.name),
      config.max_steps,
      o.print,
    );
    metrics.recover(resumeState.step);
    o.info(
      `the run already trained its ${config.max_steps} steps (checkpoint ${checkpoint!.dir}); raise max_steps (--set max_steps=N) to train further`,
    );
    return { summary: metrics.summary(), metrics, runDir, config };
  }
  mkdirSync(join(runDir, "logs"), { recursive: true });
  const mode = policyMode(config, o.inference ?? "auto");
  const policyProcesses =
    config.inference.base_urls.length > 0 ? 0 : mode === "in-process" ? 1 : config.inference.servers;
  // what ranks a launcher starts continue from (src/cli/trainer.ts) and the weight channels rank 0
  // serves, written before the config they wait for
  writeFileAtomic(resumePath(runDir), `${JSON.stringify({ checkpoint: checkpoint?.dir ?? null })}\n`);
  const channels = planChannels(config, runDir, config.inference.base_urls.length || policyProcesses);
  writeFileAtomic(join(runDir, "config.resolved.toml"), resolvedToml(config));

  const children = new Children(join(runDir, "logs"));
  let looping = false;
  const stop = (signal: string) => {
    o.warn(`${signal}: stopping the run (children: ${children.pids.join(", ") || "none"})`);
    // a pre-empted run gives the trainer time to checkpoint its last finished step (ckpt.on_sigterm)
    const grace = signal === "SIGTERM" && config.ckpt.on_sigterm ? SIGTERM_GRACE_MS : undefined;
    void children.stopAll(grace).finally(() => {
      if (!looping) undoStart();
      process.exit(signal === "SIGINT" ? 130 : 143);
    });
  };
  const onInt = () => stop("SIGINT");
  const onTerm = () => stop("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  let policy: LivePolicy | undefined;
  try {
    // the trainer first: its start-up (libtorch, the model) overlaps the policy's and the envs'
    const launch = planLaunch(config, {
      runDir,
      policyProcesses,
      ...(checkpoint ? { resumeFrom: checkpoint.dir } : {}),
    });
    for (const trainer of launch.trainers) children.spawn(trainer);
    if (config.trainer.world_size > 1 || launch.trainers.length === 0) o.info(launchLine(config, launch));
    const modelDir = checkpoint?.modelDir ?? config.model.path;
    const version = checkpoint?.step ?? 0;
    // the policy, whose loads also refresh any lagged copy of it an algorithm asks for (OPSD's teacher)
    const lagged = new LaggedCopies(config, { runDir, modelDir, version });
    policy = lagged.following(
      await startPolicy(config, {
        runDir,
        modelDir,
        version,
        mode,
        children,
        threads: launch.serverThreads,
        ...(launch.coreShare ? { coreShare: launch.coreShare } : {}),
        warn: o.warn,
      }),
    );
    if (channels) await policy.joinChannels(channels);
    const tokenizer = Tokenizer.load(config.model.path);
    const renderer = new ChatRenderer(tokenizer);
    const envs = await setupTrainEnvs({
      config,
      source,
      policy,
      laggedPolicy: (every) => lagged.client(every),
      tokenizer,
      renderer,
      info: o.info,
      warn: o.warn,
    });
    const evaluator = await TrainEval.create(config, policy, renderer);
    o.info(
      `run ${runDir}: ${envs.map((e) => `${e.resolved.name} (${e.algoName})`).join(", ")}; ${checkpoint ? `resuming after step ${checkpoint.step}` : "starting at step 1"} of ${config.max_steps}`,
    );
    looping = true;
    const result = await runTrainLoop({
      config,
      runDir,
      envs,
      policy,
      renderer,
      failure: children.failure,
      ...(resumeState ? { resume: resumeState } : {}),
      ...(evaluator ? { evaluator } : {}),
      print: o.print,
      warn: o.warn,
    });
    return { ...result, runDir, config };
  } finally {
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
    await children.stopAll();
    await policy?.close();
    if (!looping) undoStart();
  }
}

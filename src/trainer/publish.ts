// What rank 0 of the trainer writes after a step (docs/run-directory.md, "A step"): the weights as
// `weights/step_N/` (with weight_transfer = "c10d" only on some steps: writesWeights), the
// checkpoint when the step is due one, then the marker `published.json` (the step's metrics),
// then it deletes the step file and prunes old weights (both kept with ckpt.keep_steps, for rlx
// replay). Each write is whole or not at all, and a write the disk refuses is a DiskError naming
// it (src/rundir/paths.ts): the run stops with that, no partial directory is left to be taken as
// whole, and --resume continues from the newest whole checkpoint once there is space.
//
// Also the checkpoint a SIGTERM asks for (`ckpt.on_sigterm`): written between steps, of the last
// finished one, so a pre-empted run loses at most the step in flight.
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { saveModel } from "../model/hf.ts";
import type { NativeModel } from "../native/model.ts";
import type { NativeOptimizer } from "../native/train.ts";
import type { ProcessGroup } from "../native/dist.ts";
import { isCheckpointStep, writeCheckpoint } from "../rundir/checkpoint.ts";
import { writeShardedCheckpoint } from "../rundir/shard_checkpoint.ts";
import {
  batchPath,
  checkpointDir,
  diskWrite,
  PUBLISHED_MARKER,
  type PublishedStep,
  weightsDir,
  writeFileAtomic,
} from "../rundir/paths.ts";

export interface Trained {
  /** The ranks' group (absent: one unsharded trainer). A model sharded without LoRA writes its
   * checkpoints collectively, every rank its slices (src/rundir/shard_checkpoint.ts). */
  group?: ProcessGroup | null;
  runDir: string;
  config: ResolvedConfig;
  step: number;
  model: NativeModel;
  optimizer: NativeOptimizer;
  /** The model directory the run started from (config.json and tokenizer files come from it). */
  sourceDir: string;
  /** The orchestrator's state when it cut this step (every step file carries it). */
  state: unknown;
}

/** Publishes step `step`: weights, a due checkpoint, the marker; returns the marker written. */
export function publishStep(
  t: Trained,
  marker: Omit<PublishedStep, "timing">,
  timing: { wait: number; train: number },
): PublishedStep {
  const { runDir, config, step } = t;
  const publishStart = performance.now();
  const dir = weightsDir(runDir, step);
  if (writesWeights(config, step))
    diskWrite(`publishing ${dir}`, () =>
      saveModel(t.model, dir, {
        dtype: config.model.dtype,
        sourceDir: t.sourceDir,
        writeExtra: mergedWriter(t, config.model.dtype),
      }),
    );
  else mkdirSync(dir, { recursive: true }); // the marker only: the weights travel over c10d
  const checkpointStart = performance.now();
  if (isCheckpointStep(step, config)) checkpoint(t);
  const published: PublishedStep = {
    ...marker,
    ...(config.inference.weight_transfer === "c10d" ? { transfer: "c10d" as const } : {}),
    timing: {
      ...timing,
      publish: (checkpointStart - publishStart) / 1000,
      checkpoint: (performance.now() - checkpointStart) / 1000,
    },
  };
  // The checkpoint comes before the marker: once the orchestrator sees step N published, a
  // checkpoint due at N is already on disk, so a kill after that point never loses it.
  writeFileAtomic(join(dir, PUBLISHED_MARKER), JSON.stringify(published));
  if (!config.ckpt.keep_steps) {
    rmSync(batchPath(runDir, step), { force: true });
    pruneWeights(runDir, config.orchestrator.max_async_level + 3, step);
  }
  return published;
}

/**
 * Whether step `step`'s weights are written as weights/step_N/: always with weight_transfer =
 * "disk"; with "c10d" (the policy receives them in memory, weight_send.ts) every
 * inference.publish_every steps, at checkpoints, at hub pushes and at the last step.
 */
export function writesWeights(config: ResolvedConfig, step: number): boolean {
  const inf = config.inference;
  if (inf.weight_transfer === "disk" || step === config.max_steps || isCheckpointStep(step, config)) return true;
  if (config.hub.repo !== undefined && step % config.hub.interval === 0) return true;
  return inf.publish_every > 0 && step % inf.publish_every === 0;
}

/** On a rank other than 0 of a model sharded "full": the collective gathers of rank 0's
 * publishing (saveModel reads every parameter, in the order writeSafetensorsDir writes them: by
 * name), each gathered and dropped. LoRA publishes the whole adapters and needs none. */
function followPublish(model: NativeModel, config: ResolvedConfig): void {
  if (model.lora) return;
  const names = model.params().map((p) => p.name);
  for (const name of names.sort()) model.getParam(name, config.model.dtype);
}

/** Whether every rank writes its slices into the checkpoint (a model sharded without LoRA; with
 * LoRA the adapters and their AdamW state are whole on every rank, and rank 0 writes them). */
export const writesShards = (model: NativeModel, group: ProcessGroup | null | undefined): boolean =>
  !!group && model.shardGroup !== null && !model.lora;

/** On a rank other than 0: its part in rank 0's publishing of the step (the gathers of a
 * "full" model's weights) and in a due sharded checkpoint, in the order rank 0 runs them. */
export function followStep(t: Trained): void {
  if (t.config.trainer.shard === "full" && writesWeights(t.config, t.step)) followPublish(t.model, t.config);
  if (isCheckpointStep(t.step, t.config) && writesShards(t.model, t.group)) checkpoint(t);
}

/** Writes `checkpoints/step_N/` for a trained step (and prunes to ckpt.keep); with sharded
 * checkpoints every rank calls it. */
export function checkpoint(t: Trained): string {
  const what = `writing the checkpoint ${checkpointDir(t.runDir, t.step)}`;
  if (writesShards(t.model, t.group))
    return diskWrite(what, () =>
      writeShardedCheckpoint(t.runDir, t.step, {
        model: t.model,
        optimizer: t.optimizer,
        group: t.group!,
        sourceDir: t.sourceDir,
        orchestratorState: t.state,
        keep: t.config.ckpt.keep,
        publishedDir: weightsDir(t.runDir, t.step),
      }),
    );
  return diskWrite(what, () =>
    writeCheckpoint(t.runDir, t.step, {
      model: t.model,
      optimizer: t.optimizer,
      sourceDir: t.sourceDir,
      orchestratorState: t.state,
      keep: t.config.ckpt.keep,
      writeExtra: mergedWriter(t, "f32"),
    }),
  );
}

/** With `[model.lora] merged = true`: writes `merged/`, full weights with the adapter merged in, beside the adapter. */
function mergedWriter(t: Trained, dtype: "f32" | "bf16"): ((dir: string) => void) | undefined {
  if (!t.model.lora || !t.config.model.lora?.merged) return undefined;
  return (dir) => saveModel(t.model, join(dir, "merged"), { dtype, sourceDir: t.sourceDir, merged: true });
}

/** Keeps the newest `keep` published weight directories. The policy only loads the newest, and the
 * orchestrator reads every marker: it is at most max_async_level + 1 steps behind the trainer. */
function pruneWeights(runDir: string, keep: number, protect: number): void {
  const dir = join(runDir, "weights");
  const steps = readdirSync(dir)
    .map((name) => /^step_(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => b - a);
  for (const step of steps.slice(keep))
    if (step !== protect) rmSync(weightsDir(runDir, step), { recursive: true, force: true });
}

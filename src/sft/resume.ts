// Where an `rlx sft` run continues from: output_dir checked against --resume / --force before
// anything is written, and the loop state a checkpoint's orchestrator.json holds (SftState),
// refused when the data, seed or step count no longer match the run it came from. The
// checkpoint files themselves are `rlx train`'s (src/rundir/checkpoint.ts).
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { SftConfig } from "./config.ts";
import { ConfigError } from "../errors.ts";
import { type LoadedCheckpoint, latestCheckpoint, readCheckpoint } from "../rundir/checkpoint.ts";
import type { EnvEval } from "../eval/evaluate.ts";
import type { BatchCursorState, SftExample } from "./batches.ts";

/** A checkpoint's orchestrator.json in an SFT run: the loop's state after `step`. */
export interface SftState {
  format: 1;
  kind: "sft";
  step: number;
  batches: BatchCursorState;
  /** What the batcher's order depends on; a resume over other data could not continue it. */
  data: DataFingerprint;
  tokens: number;
  trainSeconds: number;
  /** The step loop's wall time so far (a resumed run's summary adds its own). */
  seconds: number;
  firstNll: number;
  lastNll: number;
  /** The step-0 eval, without per-task results (a resumed run does not repeat it). */
  evalBefore: EnvEval[];
}

export interface DataFingerprint {
  examples: number;
  /** Bun.hash of every example's tokens and target weights, in dataset order. */
  hash: string;
  seed: number;
  shuffle: boolean;
}

export function dataFingerprint(examples: readonly SftExample[], config: SftConfig): DataFingerprint {
  const text = examples.map((e) => `${e.tokenIds.join(",")}|${e.ceWeights.join(",")}`).join("\n");
  return { examples: examples.length, hash: String(Bun.hash(text)), seed: config.seed, shuffle: config.data.shuffle };
}

/** Files whose presence means output_dir holds a run that a fresh start would overwrite. */
export const RUN_FILES = ["metrics.jsonl", "checkpoints", "tensorboard"];

/** Checks output_dir against --resume / --force before anything is written; returns the checkpoint to continue from. */
export function checkRunDir(
  runDir: string,
  options: { resume?: boolean; force?: boolean },
  warn: (line: string) => void,
): LoadedCheckpoint | undefined {
  if (options.resume) {
    const latest = latestCheckpoint(runDir, warn);
    if (!latest) {
      throw new ConfigError(`--resume: output_dir ${runDir} has no whole checkpoint to continue from`, {
        fix: "checkpoints are written every save.interval steps (--set save.interval=N); start over with --force, or without --resume in a new output_dir",
      });
    }
    return readCheckpoint(latest.dir);
  }
  if (!options.force && RUN_FILES.some((name) => existsSync(join(runDir, name)))) {
    throw new ConfigError(`output_dir ${runDir} already holds a run`, {
      fix: "continue it with --resume, start over with --force (deletes its metrics, checkpoints and model), or pick another output_dir (--set output_dir=...)",
    });
  }
  return undefined;
}

/** The checkpoint's SFT state, refused unless it continues this config's data at a step before the last. */
export function sftState(checkpoint: LoadedCheckpoint, data: DataFingerprint, totalSteps: number): SftState {
  const state = checkpoint.orchestratorState as Partial<SftState> | null;
  if (state?.format !== 1 || state.kind !== "sft" || state.step !== checkpoint.step || !state.batches || !state.data) {
    throw new ConfigError(`${checkpoint.dir}/orchestrator.json is not an rlx sft state of step ${checkpoint.step}`, {
      fix: "resume an rlx sft run (rlx train runs resume with rlx train --resume)",
    });
  }
  for (const key of ["examples", "hash", "seed", "shuffle"] as const) {
    if (state.data[key] !== data[key]) {
      throw new ConfigError(
        `--resume: the data differs from the checkpointed run's (${key}: ${state.data[key]} then, ${data[key]} now), so its order cannot continue`,
        {
          fix: "resume with the config and data files the run started with (config.resolved.toml in output_dir), or start over with --force",
        },
      );
    }
  }
  if (state.step >= totalSteps) {
    throw new ConfigError(
      `--resume: checkpoint ${checkpoint.dir} is at step ${state.step}, and this config trains ${totalSteps} steps`,
      { fix: "raise trainer.steps (--set trainer.steps=N) to train further" },
    );
  }
  return state as SftState;
}

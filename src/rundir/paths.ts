// The run directory's names and its one write rule (docs/run-directory.md). Every process of a run
// (the orchestrator, each trainer rank, `rlx sft`) meets the others only through these files, so
// their paths live here and both sides import them; neither imports the other.
//
// The write rule: a file another process may read is written whole or not at all (tmp + rename in
// the same directory), and a directory is visible to readers only once its marker file exists.
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The marker file that makes `weights/step_N/` visible to readers. */
export const PUBLISHED_MARKER = "published.json";

/** What the marker holds: the metrics of the step that produced these weights. */
export interface PublishedStep {
  step: number;
  /** The orchestrator's half of the step's metrics, passed through from the step file. */
  orchestrator: Record<string, number>;
  /** The trainer's: losses, mismatch_kl, entropy, grad norm, ... (src/trainer/step.ts). */
  metrics: Record<string, number>;
  perEnv: Record<string, Record<string, number>>;
  /** Seconds spent waiting for the step file, training, and saving the weights. */
  timing: { wait: number; train: number; publish: number; checkpoint: number };
}

export const batchPath = (runDir: string, step: number) => join(runDir, "batches", `step_${step}.bin`);
export const weightsDir = (runDir: string, step: number) => join(runDir, "weights", `step_${step}`);
export const checkpointsDir = (runDir: string) => join(runDir, "checkpoints");
export const checkpointDir = (runDir: string, step: number) => join(checkpointsDir(runDir), `step_${step}`);
export const auditPath = (runDir: string, step: number) => join(runDir, "rollouts", `step_${step}.jsonl`);
export const metricsPath = (runDir: string) => join(runDir, "metrics.jsonl");

/** Writes `data` to `path` whole or not at all (tmp + rename); a failed write leaves no tmp file. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, data);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

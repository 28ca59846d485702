// The run directory's names and its one write rule (docs/run-directory.md). Every process of a run
// (the orchestrator, each trainer rank, `rlx sft`) meets the others only through these files, so
// their paths live here and both sides import them; neither imports the other.
//
// The write rule: a file another process may read is written whole or not at all (tmp + rename in
// the same directory), and a directory is visible to readers only once its marker file exists.
// A write the disk refuses (ENOSPC, ...) is a DiskError naming the file (diskWrite).
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DiskError } from "../errors.ts";

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
  /** "c10d": the weights follow over the weight channels (the directory may hold only this marker). */
  transfer?: "c10d";
}

export const batchPath = (runDir: string, step: number) => join(runDir, "batches", `step_${step}.bin`);
export const weightsDir = (runDir: string, step: number) => join(runDir, "weights", `step_${step}`);
export const checkpointsDir = (runDir: string) => join(runDir, "checkpoints");
export const checkpointDir = (runDir: string, step: number) => join(checkpointsDir(runDir), `step_${step}`);
export const auditPath = (runDir: string, step: number) => join(runDir, "rollouts", `step_${step}.jsonl`);
export const failedPath = (runDir: string, step: number) => join(runDir, "rollouts", `failed_step_${step}.jsonl`);
export const scheduleDir = (runDir: string) => join(runDir, "schedule");
/** One policy engine's schedule record (src/engine/schedule.ts), a new file at every start. */
export const schedulePath = (runDir: string, name: string) => join(scheduleDir(runDir), `${name}-${Date.now()}.jsonl`);
export const metricsPath = (runDir: string) => join(runDir, "metrics.jsonl");
/** {"checkpoint": DIR or null}: what this start of `rlx train` continues from, for ranks a launcher starts. */
export const resumePath = (runDir: string) => join(runDir, "resume.json");

/** Writes `data` to `path` whole or not at all (tmp + rename); a failed write leaves no tmp file. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  diskWrite(`writing ${path}`, () => {
    try {
      writeFileSync(tmp, data);
      renameSync(tmp, path);
    } catch (err) {
      rmSync(tmp, { force: true });
      throw err;
    }
  });
}

const DISK_ERRORS: Record<string, string> = {
  ENOSPC: "the disk is full",
  EDQUOT: "the disk quota is exhausted",
  EROFS: "the filesystem is read-only",
  EIO: "the disk reported an I/O error",
};

/**
 * Runs `write` (which cleans up its own partial files, as every writer here does); a refusal of
 * the disk becomes a DiskError saying what was being written and how to continue, instead of a
 * bare ENOSPC with a stack trace. Other errors pass through.
 */
export function diskWrite<T>(what: string, write: () => T): T {
  try {
    return write();
  } catch (err) {
    const code = (err as { code?: unknown })?.code;
    if (typeof code !== "string" || !(code in DISK_ERRORS)) throw err;
    throw new DiskError(`${what} failed: ${DISK_ERRORS[code]} (${code}); the partial files were removed`, {
      fix: "free space on the run directory's filesystem, then continue with rlx train CONFIG --resume (it starts from the newest whole checkpoint)",
      cause: err,
    });
  }
}

// Checkpoints (docs/architecture.md §10): `checkpoints/step_N/` holds everything a killed run needs to continue
// as if it had not stopped: the trainer's float32 weights and AdamW state after step N, and the
// orchestrator's state as it was when it cut batch N (the step and everything it carries across
// steps, src/orchestrator/carried.ts: nothing is in flight at the cut).
//
//   checkpoints/step_N/
//     trainer/model/         HF layout, float32 (exact, whatever dtype the run publishes in)
//     trainer/optimizer.bin  the shim's AdamW state image
//     orchestrator.json      the orchestrator's state (src/orchestrator/loop.ts); in an `rlx sft`
//                            run, the SFT loop's (src/sft/run.ts: data cursor, running totals)
//     manifest.json          step, format, and the size and CRC-32 of every file above (each
//                            tensor of the weights too); written last, before the rename
//
// One writer (the trainer: the orchestrator's state reaches it inside step file N), one atomic
// step: everything is written into `step_N.tmp-<pid>/` and the directory is renamed into place.
// So a SIGKILL at any moment leaves either a whole checkpoint or a tmp directory, which the next
// start ignores (with a warning) and deletes. The manifest's sizes and checksums are checked on
// load, so a checkpoint damaged after the fact (truncated, or bytes flipped in place) is refused,
// naming the file and tensor, instead of loading wrong; --resume then takes the one before it.
//
// A sharded run (trainer.shard "optimizer" or "full") has no rank holding the whole weights or
// AdamW state: every rank writes its slices into trainer/shards/ and trainer/shards.json says how
// they fit (shard_checkpoint.ts writes it, shard_format.ts checks it, shard_restore.ts reads it
// back on any number of ranks). Its trainer/model/ holds config.json and the tokenizer files only.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { RlxError } from "../errors.ts";
import { CHECKSUM_ALGORITHM, type Checksums, checksumFile, crc32, hex } from "../model/checksums.ts";
import { saveModel } from "../model/hf.ts";
import { verifyChecksums } from "../model/integrity.ts";
import type { NativeModel } from "../native/model.ts";
import type { NativeOptimizer } from "../native/train.ts";
import { checkpointDir, checkpointsDir, metricsPath, writeFileAtomic } from "./paths.ts";
import { checkShards, optimizerFile, readShardsFile, SHARDS_FILE, weightsFile } from "./shard_format.ts";

/** 2: sizes and CRC-32s; 1 (still read): sizes only. */
const FORMAT = 2;

export class CheckpointError extends RlxError {}

/** A checkpoint directory a killed writer left: `step_N.tmp-<pid>`, or a sharded one's `step_N.tmp-shards`. */
export const PARTIAL_CHECKPOINT = /\.tmp-(?:\d+|shards)$/;

interface Manifest {
  format: number;
  step: number;
  created: string;
  algorithm?: typeof CHECKSUM_ALGORITHM;
  /** Path relative to the checkpoint directory -> its checksum (format 1: its size in bytes). */
  files: Checksums | Record<string, number>;
}

export interface CheckpointTimingConfig {
  max_steps: number;
  ckpt: { interval: number };
}

/** Steps that end with a checkpoint: every `interval` steps, and always the last one. */
export function isCheckpointStep(step: number, config: CheckpointTimingConfig): boolean {
  return step === config.max_steps || (config.ckpt.interval > 0 && step % config.ckpt.interval === 0);
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

export interface CheckpointContents {
  model: NativeModel;
  optimizer: NativeOptimizer;
  /** The directory the model came from (tokenizer files are copied from it). */
  sourceDir: string;
  orchestratorState: unknown;
  /** Complete checkpoints kept after this one is written. */
  keep: number;
  /** Writes further files into trainer/model before it is moved into place (LoRA's merged/ weights). */
  writeExtra?: (dir: string) => void;
}

/** Writes `checkpoints/step_N/` atomically and prunes to the newest `keep`. */
export function writeCheckpoint(runDir: string, step: number, contents: CheckpointContents): string {
  const final = checkpointDir(runDir, step);
  const tmp = `${final}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(join(tmp, "trainer"), { recursive: true });
  try {
    const saved = saveModel(contents.model, join(tmp, "trainer/model"), {
      dtype: "f32",
      sourceDir: contents.sourceDir,
      writeExtra: contents.writeExtra,
    });
    const optimizer = contents.optimizer.saveState();
    writeFileSync(join(tmp, "trainer/optimizer.bin"), optimizer);
    const state = new TextEncoder().encode(JSON.stringify(contents.orchestratorState));
    writeFileSync(join(tmp, "orchestrator.json"), state);
    // the big files' checksums come from the bytes as written; the small rest are read back
    const files: Checksums = {
      "trainer/optimizer.bin": { bytes: optimizer.byteLength, crc32: hex(crc32(optimizer)) },
      "orchestrator.json": { bytes: state.byteLength, crc32: hex(crc32(state)) },
    };
    for (const [file, sum] of Object.entries(saved.checksums)) files[`trainer/model/${file}`] = sum;
    writeManifest(tmp, step, files);
    rmSync(final, { recursive: true, force: true });
    renameSync(tmp, final);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  pruneCheckpoints(runDir, contents.keep);
  return final;
}

/**
 * Writes `dir`/manifest.json, the last file of a checkpoint: `known` checksums (of files whose
 * bytes were hashed as they were written) and every other file of `dir`, read back.
 */
export function writeManifest(dir: string, step: number, known: Checksums): void {
  const files: Checksums = { ...known };
  for (const file of listFiles(dir)) files[file] ??= checksumFile(join(dir, file));
  const manifest: Manifest = {
    format: FORMAT,
    step,
    created: new Date().toISOString(),
    algorithm: CHECKSUM_ALGORITHM,
    files,
  };
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest, null, 1));
}

function completeSteps(runDir: string): number[] {
  const dir = checkpointsDir(runDir);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((name) => /^step_(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

/** Deletes all but the newest `keep` checkpoints. */
export function pruneCheckpoints(runDir: string, keep: number): void {
  const steps = completeSteps(runDir);
  for (const step of steps.slice(0, Math.max(0, steps.length - keep)))
    rmSync(checkpointDir(runDir, step), { recursive: true, force: true });
}

/** Problems with a checkpoint directory, or [] when it is whole. */
export function checkCheckpoint(dir: string): string[] {
  const manifestPath = join(dir, "manifest.json");
  if (!existsSync(manifestPath)) return ["no manifest.json (the checkpoint was not finished)"];
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as Manifest;
  } catch (err) {
    return [`manifest.json does not parse: ${(err as Error).message}`];
  }
  if (manifest.format !== FORMAT && manifest.format !== 1)
    return [`checkpoint format ${manifest.format}, this rlx reads ${FORMAT} and 1`];
  const problems =
    manifest.format === 1
      ? checkSizes(dir, manifest.files as Record<string, number>)
      : verifyChecksums(dir, manifest.files as Checksums);
  const sharded = SHARDS_FILE in manifest.files;
  for (const required of ["orchestrator.json", sharded ? SHARDS_FILE : "trainer/optimizer.bin"]) {
    if (!(required in manifest.files)) problems.push(`${required} is not in the manifest`);
  }
  if (sharded) problems.push(...checkShardedFiles(dir, manifest.files, problems));
  // full weights (config.json) or, with [model.lora], the adapter (adapter_config.json)
  if (!("trainer/model/config.json" in manifest.files) && !("trainer/model/adapter_config.json" in manifest.files))
    problems.push("trainer/model/config.json is not in the manifest");
  return problems;
}

/** A sharded checkpoint's rank files: each in the manifest, and the tensors of a damaged one named. */
function checkShardedFiles(dir: string, files: Manifest["files"], problems: readonly string[]): string[] {
  const out: string[] = [];
  try {
    for (const { rank } of readShardsFile(dir).ranks)
      for (const file of [weightsFile(rank), optimizerFile(rank)])
        if (!(file in files)) out.push(`${file} is not in the manifest`);
  } catch {
    // checkShards reports an unreadable shards.json
  }
  const damaged = new Set(problems.map((problem) => problem.split(/[: ]/, 1)[0]!));
  return [...out, ...checkShards(dir, damaged)];
}

/** Format 1 manifests (before checksums): each file's size only. */
function checkSizes(dir: string, sizes: Record<string, number>): string[] {
  const problems: string[] = [];
  for (const [file, size] of Object.entries(sizes)) {
    const path = join(dir, file);
    if (!existsSync(path)) problems.push(`${file} is missing`);
    else if (statSync(path).size !== size)
      problems.push(`${file} has ${statSync(path).size} bytes, the manifest says ${size}`);
  }
  return problems;
}

/**
 * The newest whole checkpoint of a run (of a step before `before`, when given), or undefined.
 * Partial ones (tmp directories left by a kill, or damaged ones) are reported through `warn` and
 * skipped; tmp directories are deleted.
 */
export function latestCheckpoint(
  runDir: string,
  warn: (message: string) => void,
  before = Number.POSITIVE_INFINITY,
): { step: number; dir: string } | undefined {
  const dir = checkpointsDir(runDir);
  if (!existsSync(dir)) return undefined;
  for (const name of readdirSync(dir)) {
    if (PARTIAL_CHECKPOINT.test(name)) {
      warn(`ignoring the partial checkpoint ${join(dir, name)} (the run was stopped while writing it); deleting it`);
      rmSync(join(dir, name), { recursive: true, force: true });
    }
  }
  for (const step of completeSteps(runDir)
    .filter((k) => k < before)
    .reverse()) {
    const problems = checkCheckpoint(checkpointDir(runDir, step));
    if (problems.length === 0) return { step, dir: checkpointDir(runDir, step) };
    warn(
      `ignoring the damaged checkpoint ${checkpointDir(runDir, step)}: ${problems.join("; ")} (trying the one before it)`,
    );
  }
  return undefined;
}

export interface LoadedCheckpoint {
  step: number;
  dir: string;
  /** Weights, config.json and tokenizer files; a sharded checkpoint's has no weights. */
  modelDir: string;
  /** A sharded checkpoint: the path of its shards.json; restore it with shard_restore.ts. */
  sharded?: string;
  /** The whole AdamW state image (not in a sharded checkpoint: shard_restore.ts builds each rank's). */
  optimizerState(): Uint8Array;
  orchestratorState: unknown;
}

/** Reads a checkpoint directory, refusing one that is not whole. */
export function readCheckpoint(dir: string): LoadedCheckpoint {
  const problems = checkCheckpoint(dir);
  if (problems.length > 0) {
    throw new CheckpointError(`${dir} is not a usable checkpoint: ${problems.join("; ")}`, {
      fix: "resume from another checkpoint (--resume picks the newest whole one)",
    });
  }
  return openCheckpoint(dir);
}

/** Reads a checkpoint directory that checkCheckpoint (or latestCheckpoint) has just found whole. */
export function openCheckpoint(dir: string): LoadedCheckpoint {
  const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as Manifest;
  const sharded = SHARDS_FILE in manifest.files ? join(dir, SHARDS_FILE) : undefined;
  return {
    step: manifest.step,
    dir,
    modelDir: join(dir, "trainer/model"),
    ...(sharded ? { sharded } : {}),
    optimizerState: () => {
      if (sharded)
        throw new CheckpointError(`${dir} is sharded: it has no whole optimizer state`, {
          fix: "restore it with restoreShardedCheckpoint (src/rundir/shard_restore.ts)",
        });
      return new Uint8Array(readFileSync(join(dir, "trainer/optimizer.bin")));
    },
    orchestratorState: JSON.parse(readFileSync(join(dir, "orchestrator.json"), "utf8")) as unknown,
  };
}

const STEP_FILE = /^(?:failed_)?step_(\d+)(\.bin|\.jsonl)?$/;

/**
 * Makes a run directory look as it did right after step `step` was checkpointed: step files,
 * published weights, rollout records (audit and failed) and checkpoints of later steps are deleted (resuming from an
 * older checkpoint abandons the later ones), metrics.jsonl keeps only lines of steps <= `step`,
 * and tmp files of killed writers are removed. Called before a resumed run starts.
 */
export function rewindRunDir(runDir: string, step: number): void {
  for (const sub of ["batches", "weights", "rollouts", "checkpoints"]) {
    const dir = join(runDir, sub);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      const match = STEP_FILE.exec(name);
      if (name.includes(".tmp-") || (match && Number(match[1]) > step))
        rmSync(join(dir, name), { recursive: true, force: true });
    }
  }
  const metrics = metricsPath(runDir);
  if (existsSync(metrics)) {
    const kept = readFileSync(metrics, "utf8")
      .split("\n")
      .filter((line) => {
        if (!line.trim()) return false;
        try {
          return (JSON.parse(line) as { step?: number }).step! <= step;
        } catch {
          return false; // a line cut by the kill
        }
      });
    writeFileAtomic(metrics, kept.map((line) => `${line}\n`).join(""));
  }
}

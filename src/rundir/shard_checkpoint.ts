// Writing a sharded checkpoint (checkpoint.ts's header; the files are shard_format.ts's): every
// rank of a sharded trainer (trainer.shard "optimizer" or "full", full fine-tuning) writes its own
// slices of the weights and of the AdamW state, and rank 0 the rest, into one shared directory
// that rank 0 renames into place. Nothing is gathered: no rank ever holds the whole model.
//
// Contract: every rank calls writeShardedCheckpoint(runDir, step, contents) at the same step, with
// its ProcessGroup as `group`; it is collective (three agreements over the group). The order:
//   1. rank 0 empties `checkpoints/step_N.tmp-shards/` (a fixed name, so every rank finds it);
//   2. every rank writes trainer/shards/rank_R.{weights,optimizer}.bin and a small rank_R.json
//      with their CRC-32s (computed from the bytes as written, not read back);
//   3. rank 0 merges those into trainer/shards.json, writes orchestrator.json, trainer/model/
//      (the step's published weights, hard-linked: whole, in the published dtype, for the policy
//      of a resumed run; or config.json and the tokenizer files only), manifest.json last, and
//      renames the directory to `step_N/`, then prunes to `keep`.
// Each step ends with an agreement (an allreduce of "did this rank fail"), so a rank that fails
// (disk full) makes every rank throw instead of leaving the others waiting out the timeout. A kill
// at any moment leaves either the whole `step_N/` or the tmp directory, which the next start
// deletes (PARTIAL_CHECKPOINT). The directory must be one every rank sees (a shared filesystem).
import {
  closeSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import type { Checksums, FileChecksum } from "../model/checksums.ts";
import { crc32, hex } from "../model/checksums.ts";
import { readModelConfig } from "../model/config.ts";
import { TOKENIZER_FILES } from "../model/dir_files.ts";
import type { NativeModel } from "../native/model.ts";
import type { NativeOptimizer } from "../native/train.ts";
import { CheckpointError, pruneCheckpoints, writeManifest } from "./checkpoint.ts";
import { checkpointDir, PUBLISHED_MARKER } from "./paths.ts";
import {
  fileOffsets,
  newShardsFile,
  OPTIMIZER_HEADER_BYTES,
  optimizerFile,
  pieceOf,
  type RankShard,
  rankRange,
  SHARDS_DIR,
  SHARDS_FILE,
  type ShardUnit,
  weightsFile,
} from "./shard_format.ts";
import { DTYPE_BYTES as BYTES } from "../data/dtypes.ts";

/** What the checkpoint protocol needs of a ProcessGroup (src/native/dist.ts): pass the group itself. */
export interface ShardGroup {
  readonly rank: number;
  readonly worldSize: number;
  allreduce(values: BigInt64Array, op: "max"): void;
}

export interface ShardedCheckpointContents {
  /** Sharded over `group` (ProcessGroup.shard), without LoRA. */
  model: NativeModel;
  optimizer: NativeOptimizer;
  group: ShardGroup;
  /** The run's model directory: config.json and the tokenizer files are copied from it (rank 0). */
  sourceDir: string;
  /** Rank 0's: the orchestrator's state from step file N (other ranks' is ignored). */
  orchestratorState: unknown;
  /** Complete checkpoints kept after this one is written. */
  keep: number;
  /** The step's published weights (`weights/step_N/`, rank 0's), linked into trainer/model/: what a
   * resumed run's policy starts from (the trainer restores the slices). Absent: config.json and
   * the tokenizer files only. */
  publishedDir?: string;
}

/** What a rank reports to rank 0 through trainer/shards/rank_R.json. */
interface RankReport {
  shard: RankShard;
  files: Checksums;
  adamStep: number;
  stateDtype: "f32" | "f64";
}

/** The fixed tmp directory every rank of a sharded checkpoint writes into. */
export const shardedTmpDir = (runDir: string, step: number) => `${checkpointDir(runDir, step)}.tmp-shards`;

/** Writes `checkpoints/step_N/` from every rank's slices; collective (see the header). */
export function writeShardedCheckpoint(runDir: string, step: number, contents: ShardedCheckpointContents): string {
  const { model, group } = contents;
  if (model.shardGroup === null || model.lora)
    throw new CheckpointError("writeShardedCheckpoint needs a model sharded without LoRA", {
      fix: "write an unsharded or LoRA model's checkpoint with writeCheckpoint (its adapters are whole on every rank)",
    });
  const final = checkpointDir(runDir, step);
  const tmp = shardedTmpDir(runDir, step);
  const lead = group.rank === 0;
  try {
    agree(group, "preparing", () => {
      if (!lead) return;
      rmSync(tmp, { recursive: true, force: true });
      mkdirSync(join(tmp, SHARDS_DIR), { recursive: true });
    });
    agree(group, "writing its shard", () => {
      const report = writeRankFiles(tmp, contents);
      writeFileSync(join(tmp, reportFile(group.rank)), JSON.stringify(report));
    });
    agree(group, "finishing", () => {
      if (!lead) return;
      finish(tmp, step, contents);
      rmSync(final, { recursive: true, force: true });
      renameSync(tmp, final);
    });
  } catch (err) {
    if (lead) rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  if (lead) pruneCheckpoints(runDir, contents.keep);
  return final;
}

const reportFile = (rank: number) => `${SHARDS_DIR}/rank_${rank}.json`;

/**
 * Runs `work` on this rank, then agrees with every rank on whether all succeeded: this rank's own
 * error is rethrown; another rank's failure becomes a CheckpointError here, so no rank waits.
 */
function agree(group: ShardGroup, what: string, work: () => void): void {
  let failure: unknown;
  try {
    work();
  } catch (err) {
    failure = err;
  }
  const failed = BigInt64Array.of(failure === undefined ? 0n : BigInt(group.rank + 1));
  group.allreduce(failed, "max");
  if (failure !== undefined) throw failure;
  if (failed[0] !== 0n)
    throw new CheckpointError(`the sharded checkpoint failed: rank ${Number(failed[0]) - 1} failed ${what}`, {
      fix: "that rank's log says why; the run continues from the checkpoint before it (--resume)",
    });
}

/** Writes this rank's weights and AdamW slices; returns their checksums for rank 0. */
function writeRankFiles(tmp: string, contents: ShardedCheckpointContents): RankReport {
  const { model, group } = contents;
  const layout = model.shardLayout();
  if (layout.world !== group.worldSize || layout.rank !== group.rank)
    throw new CheckpointError(
      `the model is sharded as rank ${layout.rank} of ${layout.world}, the group is rank ${group.rank} of ${group.worldSize}`,
    );
  const units: ShardUnit[] = layout.units;
  const ranges = units.map((unit) => rankRange(unit, group.rank));
  const image = contents.optimizer.saveState();
  const header = new DataView(image.buffer, image.byteOffset, OPTIMIZER_HEADER_BYTES);
  const stateDtype: "f32" | "f64" = header.getBigInt64(24, true) === 3n ? "f64" : "f32";
  const offsets = fileOffsets(units, model.dtype, stateDtype);
  if (Number(header.getBigInt64(16, true)) !== units.length || image.byteLength !== offsets.optimizerBytes)
    throw new CheckpointError("the optimizer does not hold this model's slices", {
      fix: "create the optimizer after ProcessGroup.shard",
    });

  const pieces: RankShard["pieces"] = { weights: {}, optimizer: {} };
  const weightBytes = BYTES[model.dtype];
  const stateBytes = BYTES[stateDtype];
  const fd = openSync(join(tmp, weightsFile(group.rank)), "w");
  let weightsCrc = 0;
  try {
    units.forEach((unit, u) => {
      const slice = model.readSlice(u);
      writeAll(fd, slice);
      weightsCrc = crc32(slice, weightsCrc);
      const first = group.rank * unit.chunk;
      const stateAt = offsets.optimizer[u]!;
      for (const tensor of unit.params) {
        const piece = pieceOf(tensor, ranges[u]!);
        if (!piece) continue;
        const [a, b] = [piece[0] - first, piece[1] - first];
        pieces.weights[tensor.name] = hex(crc32(slice.subarray(a * weightBytes, b * weightBytes)));
        const avg = image.subarray(stateAt + a * stateBytes, stateAt + b * stateBytes);
        const sqAt = stateAt + unit.chunk * stateBytes;
        const sq = image.subarray(sqAt + a * stateBytes, sqAt + b * stateBytes);
        pieces.optimizer[tensor.name] = hex(crc32(sq, crc32(avg)));
      }
    });
  } finally {
    closeSync(fd);
  }
  writeFileSync(join(tmp, optimizerFile(group.rank)), image);
  const files: Record<string, FileChecksum> = {
    [weightsFile(group.rank)]: { bytes: offsets.weightsBytes, crc32: hex(weightsCrc) },
    [optimizerFile(group.rank)]: { bytes: image.byteLength, crc32: hex(crc32(image)) },
  };
  const shard: RankShard = {
    rank: group.rank,
    weights: weightsFile(group.rank),
    optimizer: optimizerFile(group.rank),
    ranges,
    pieces,
  };
  return { shard, files, adamStep: Number(header.getBigInt64(8, true)), stateDtype };
}

function writeAll(fd: number, data: Uint8Array): void {
  for (let done = 0; done < data.byteLength;) done += writeSync(fd, data, done, data.byteLength - done);
}

/** Rank 0, once every rank's files are written: shards.json, the small files, the manifest. */
function finish(tmp: string, step: number, contents: ShardedCheckpointContents): void {
  const { model, group } = contents;
  const reports = Array.from({ length: group.worldSize }, (_, rank) => {
    const path = join(tmp, reportFile(rank));
    const report = JSON.parse(readFileSync(path, "utf8")) as RankReport;
    rmSync(path);
    return report;
  });
  const adamSteps = new Set(reports.map((r) => r.adamStep));
  if (adamSteps.size !== 1)
    throw new CheckpointError(`the ranks' AdamW states are at different steps (${[...adamSteps].join(", ")})`);
  const layout = model.shardLayout();
  const shards = newShardsFile({
    mode: layout.mode,
    world: group.worldSize,
    dtype: model.dtype,
    stateDtype: reports[0]!.stateDtype,
    adamStep: reports[0]!.adamStep,
    units: layout.units,
    ranks: reports.map((r) => r.shard),
  });
  writeFileSync(join(tmp, SHARDS_FILE), JSON.stringify(shards));
  writeFileSync(join(tmp, "orchestrator.json"), JSON.stringify(contents.orchestratorState));
  if (contents.publishedDir) linkPublished(contents.publishedDir, join(tmp, "trainer/model"));
  else writeModelFiles(join(tmp, "trainer/model"), contents.sourceDir, model);
  writeManifest(tmp, step, Object.assign({}, ...reports.map((r) => r.files)) as Checksums);
}

/** trainer/model/: the published directory's files as hard links (a copy where the filesystem
 * has none), so pruning weights/ later leaves them here; the marker is the publisher's own. */
function linkPublished(from: string, dir: string): void {
  mkdirSync(dir, { recursive: true });
  for (const name of readdirSync(from)) {
    if (name === PUBLISHED_MARKER) continue;
    try {
      linkSync(join(from, name), join(dir, name));
    } catch {
      copyFileSync(join(from, name), join(dir, name));
    }
  }
}

/** trainer/model/: config.json and the tokenizer files of the run's model, no weights. */
function writeModelFiles(dir: string, sourceDir: string, model: NativeModel): void {
  const config = readModelConfig(sourceDir);
  for (const [key, value] of Object.entries(config.shim)) {
    if (model.config[key as keyof typeof model.config] !== value)
      throw new CheckpointError(
        `${sourceDir}/config.json says ${key} = ${value}, the model has ${model.config[key as keyof typeof model.config]}`,
      );
  }
  mkdirSync(dir, { recursive: true });
  for (const name of ["config.json", ...TOKENIZER_FILES])
    if (existsSync(join(sourceDir, name))) copyFileSync(join(sourceDir, name), join(dir, name));
}

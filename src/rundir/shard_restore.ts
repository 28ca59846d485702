// Reading a sharded checkpoint (shard_format.ts's files) back into a model, on any number of ranks:
// the world size and trainer.shard mode may differ from the run that wrote it (2 ranks -> 1 or 4,
// "full" -> "optimizer"), because a unit's flat does not depend on them: only where it is cut.
//
// Contract: after readCheckpoint (which checks every file's CRC-32) says `sharded`, and after the
// model is sharded (ProcessGroup.shard) and its optimizer created, every rank calls
// restoreShardedCheckpoint(dir, model, optimizer, group): collective (an agreement and
// model.gatherSlices). Each rank reads from the old rank files only the tensor pieces that overlap
// its own new ranges, checking each piece's CRC-32 as it streams by, and writes nothing into the
// model or optimizer until every piece it read is whole and every rank says the same; a damaged
// piece is a CheckpointError naming the file and tensor, on every rank.
//
// restoreWholeCheckpoint(dir, model, optimizer?) reads one into an unsharded model (export, or
// shard "none"; the weights convert to the model's dtype): not collective; it assembles one whole
// tensor at a time, so it holds the model once plus one tensor, and the whole AdamW image when an
// optimizer is given (whose state dtype must then be the checkpoint's: float64 for a float64
// model, else float32).
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import type { NativeModel } from "../native/model.ts";
import type { NativeOptimizer } from "../native/train.ts";
import { CheckpointError } from "./checkpoint.ts";
import {
  checkShards,
  checkShardsLayout,
  fileOffsets,
  numelOf,
  OPTIMIZER_HEADER_BYTES,
  pieceOf,
  RankFileReader,
  rankRange,
  readShardsFile,
  type ShardsFile,
  type ShardTensor,
} from "./shard_format.ts";
import type { ShardGroup } from "./shard_checkpoint.ts";
import { DTYPE_BYTES } from "../data/dtypes.ts";

const BLOCK = 16 << 20;
const FIX =
  "resume from the checkpoint before it (--resume takes the newest whole one once this one is deleted), or delete this one";
/** rlx.h dtype codes of the AdamW state image header. */
const STATE_CODE = { f32: 0n, f64: 3n } as const;
const MAGIC = new TextEncoder().encode("RLXADAM1");

/** A destination for the elements [first, first + n) of a unit's flat (or of one tensor's). */
interface Target {
  bytes: Uint8Array;
  first: number;
}

/** One rank file of the checkpoint, opened for its pieces, with the damage it has shown. */
class Pieces {
  readonly #readers = new Map<string, RankFileReader>();
  readonly problems: string[] = [];
  readonly offsets;
  readonly #block = new Uint8Array(BLOCK);

  constructor(
    readonly dir: string,
    readonly shards: ShardsFile,
  ) {
    this.offsets = fileOffsets(shards.units, shards.dtype, shards.stateDtype);
  }

  /**
   * Streams tensor `tensor`'s piece in old rank `rank`'s files, checks its CRC-32s, and copies the
   * elements of it in [want[0], want[1]) into the weights target and (given) the two state targets.
   */
  copy(
    rank: number,
    u: number,
    tensor: ShardTensor,
    want: [number, number],
    weights: Target,
    state?: [Target, Target],
  ) {
    const old = this.shards.ranks[rank]!;
    const piece = pieceOf(tensor, old.ranges[u]!);
    if (!piece || Math.max(piece[0], want[0]) >= Math.min(piece[1], want[1])) return;
    const unit = this.shards.units[u]!;
    const first = rank * unit.chunk;
    const wb = DTYPE_BYTES[this.shards.dtype];
    const sb = DTYPE_BYTES[this.shards.stateDtype];
    const at = (base: number, bytes: number) => base + (piece[0] - first) * bytes;
    const w = this.#stream(old.weights, at(this.offsets.weights[u]!, wb), piece, want, wb, weights, 0);
    this.#verify(old.weights, tensor.name, w, old.pieces.weights[tensor.name]);
    if (!state) return;
    const avgAt = at(this.offsets.optimizer[u]!, sb);
    const avg = this.#stream(old.optimizer, avgAt, piece, want, sb, state[0], 0);
    const both = this.#stream(old.optimizer, avgAt + unit.chunk * sb, piece, want, sb, state[1], avg);
    this.#verify(old.optimizer, tensor.name, both, old.pieces.optimizer[tensor.name]);
  }

  close(): void {
    for (const reader of this.#readers.values()) reader.close();
  }

  #verify(file: string, tensor: string, crc: number, want: string | undefined): void {
    if ((crc >>> 0).toString(16).padStart(8, "0") !== want)
      this.problems.push(`${file}: tensor ${tensor} damaged (checksum mismatch)`);
  }

  /** Reads piece [p0, p1) at byte `at` in blocks, chaining the CRC, copying the part in `want`. */
  #stream(file: string, at: number, [p0, p1]: number[], want: number[], bytes: number, to: Target, crc: number) {
    let reader = this.#readers.get(file);
    if (!reader) this.#readers.set(file, (reader = new RankFileReader(join(this.dir, file))));
    const perBlock = Math.floor(BLOCK / bytes);
    for (let x = p0!; x < p1!; x += perBlock) {
      const n = Math.min(perBlock, p1! - x);
      const read = reader.read(at + (x - p0!) * bytes, n * bytes, crc, this.#block);
      crc = read.crc;
      const [lo, hi] = [Math.max(x, want[0]!), Math.min(x + n, want[1]!)];
      if (lo < hi) to.bytes.set(read.bytes.subarray((lo - x) * bytes, (hi - x) * bytes), (lo - to.first) * bytes);
    }
    return crc;
  }
}

/**
 * Refuses a checkpoint whose layout is not this model's (another architecture), or, restoring
 * slices (`units` given: they are copied raw), whose dtype is not the model's.
 */
function checkFits(dir: string, shards: ShardsFile, model: NativeModel, units: ShardsFile["units"] | null): void {
  const problems = checkShardsLayout(shards);
  if (units) {
    if (shards.dtype !== model.dtype) problems.push(`its weights are ${shards.dtype}, the model is ${model.dtype}`);
    const same = (a: ShardsFile["units"][number], b: typeof a) =>
      a.name === b.name && a.numel === b.numel && JSON.stringify(a.params) === JSON.stringify(b.params);
    if (units.length !== shards.units.length || units.some((unit, u) => !same(unit, shards.units[u]!)))
      problems.push("its units are not this model's (another architecture?)");
  }
  if (model.lora) problems.push("the model has LoRA adapters; a sharded checkpoint holds full fine-tuning");
  if (problems.length > 0)
    throw new CheckpointError(`${dir} does not fit this model: ${problems.join("; ")}`, {
      fix: "resume with the model and dtype the run was started with",
    });
}

/** The AdamW state image header (native/src/optim.cpp): magic, step, count, state dtype code. */
function imageHeader(image: Uint8Array, shards: ShardsFile, count: number): DataView {
  image.set(MAGIC, 0);
  const view = new DataView(image.buffer, image.byteOffset, image.byteLength);
  view.setBigInt64(8, BigInt(shards.adamStep), true);
  view.setBigInt64(16, BigInt(count), true);
  view.setBigInt64(24, STATE_CODE[shards.stateDtype], true);
  return view;
}

/**
 * Restores a sharded checkpoint into a model sharded over `group` (any world size and mode): its
 * slices, its optimizer's AdamW state (with the checkpoint's step count), then the whole
 * parameters ("optimizer" mode). Collective: every rank calls it.
 */
export function restoreShardedCheckpoint(
  dir: string,
  model: NativeModel,
  optimizer: NativeOptimizer,
  group: ShardGroup,
): void {
  const shards = readShardsFile(dir);
  const layout = model.shardLayout();
  checkFits(dir, shards, model, layout.units);
  const sb = DTYPE_BYTES[shards.stateDtype];
  const slices = layout.units.map((unit) => new Uint8Array(unit.chunk * DTYPE_BYTES[model.dtype]));
  const imageBytes = OPTIMIZER_HEADER_BYTES + layout.units.reduce((n, unit) => n + 8 + 2 * unit.chunk * sb, 0);
  const image = new Uint8Array(imageBytes);
  const view = imageHeader(image, shards, layout.units.length);
  const pieces = new Pieces(dir, shards);
  let problems: string[];
  try {
    let at = OPTIMIZER_HEADER_BYTES;
    layout.units.forEach((unit, u) => {
      const want = rankRange(unit, layout.rank);
      const first = layout.rank * unit.chunk;
      view.setBigInt64(at, BigInt(unit.chunk), true);
      const avg = { bytes: image.subarray(at + 8, at + 8 + unit.chunk * sb), first };
      const sq = { bytes: image.subarray(at + 8 + unit.chunk * sb, at + 8 + 2 * unit.chunk * sb), first };
      at += 8 + 2 * unit.chunk * sb;
      for (let rank = 0; rank < shards.world; rank++)
        for (const tensor of unit.params) pieces.copy(rank, u, tensor, want, { bytes: slices[u]!, first }, [avg, sq]);
    });
    problems = pieces.problems;
  } catch (err) {
    problems = [`reading it: ${(err as Error).message}`];
  } finally {
    pieces.close();
  }
  const failed = BigInt64Array.of(problems.length > 0 ? BigInt(group.rank + 1) : 0n);
  group.allreduce(failed, "max");
  if (problems.length > 0) throw new CheckpointError(`${dir} is damaged: ${problems.join("; ")}`, { fix: FIX });
  if (failed[0] !== 0n)
    throw new CheckpointError(
      `${dir} is damaged: rank ${Number(failed[0]) - 1} found a damaged piece (its log names it)`,
      { fix: FIX },
    );
  slices.forEach((slice, u) => model.writeSlice(u, slice));
  optimizer.loadState(image);
  model.gatherSlices();
}

/**
 * Restores a sharded checkpoint into an unsharded model (shard "none", or an export): every
 * parameter assembled whole, and with `optimizer`, its whole AdamW state. Not collective. Every
 * piece is checked before any is written into the model.
 */
export function restoreWholeCheckpoint(dir: string, model: NativeModel, optimizer?: NativeOptimizer): void {
  const shards = readShardsFile(dir);
  checkFits(dir, shards, model, null);
  const tensors = new Map(shards.units.flatMap((unit, u) => unit.params.map((t) => [t.name, { u, t }] as const)));
  const params = model.params();
  const missing = params.filter((p) => JSON.stringify(tensors.get(p.name)?.t.shape) !== JSON.stringify(p.shape));
  if (missing.length > 0 || tensors.size !== params.length)
    throw new CheckpointError(
      `${dir} does not fit this model: ${missing.map((p) => p.name).join(", ") || "other tensors"}`,
      {
        fix: "restore it into the model the run was started with",
      },
    );
  const damaged = checkShards(dir);
  if (damaged.length > 0) throw new CheckpointError(`${dir} is damaged: ${damaged.join("; ")}`, { fix: FIX });
  const sb = DTYPE_BYTES[shards.stateDtype];
  const image = optimizer
    ? new Uint8Array(OPTIMIZER_HEADER_BYTES + params.reduce((n, p) => n + 8 + 2 * numelOf(p.shape) * sb, 0))
    : null;
  const view = image ? imageHeader(image, shards, params.length) : null;
  const pieces = new Pieces(dir, shards);
  try {
    let at = OPTIMIZER_HEADER_BYTES;
    for (const param of params) {
      const { u, t } = tensors.get(param.name)!;
      const n = numelOf(t.shape);
      const want: [number, number] = [t.offset, t.offset + n];
      const weights = { bytes: new Uint8Array(n * DTYPE_BYTES[shards.dtype]), first: t.offset };
      let state: [{ bytes: Uint8Array; first: number }, { bytes: Uint8Array; first: number }] | undefined;
      if (image && view) {
        view.setBigInt64(at, BigInt(n), true);
        state = [
          { bytes: image.subarray(at + 8, at + 8 + n * sb), first: t.offset },
          { bytes: image.subarray(at + 8 + n * sb, at + 8 + 2 * n * sb), first: t.offset },
        ];
        at += 8 + 2 * n * sb;
      }
      for (let rank = 0; rank < shards.world; rank++) pieces.copy(rank, u, t, want, weights, state);
      if (pieces.problems.length > 0)
        throw new CheckpointError(`${dir} is damaged: ${pieces.problems.join("; ")}`, { fix: FIX });
      model.setParam(param.name, weights.bytes, shards.dtype, t.shape);
    }
  } finally {
    pieces.close();
  }
  if (optimizer && image) optimizer.loadState(image);
}

/**
 * The AdamW state of an unsharded checkpoint (`trainer/optimizer.bin`: one entry per parameter, in
 * the model's order) cut to this rank's slices of a sharded model, loaded into its optimizer: so a
 * run that outgrew one replica resumes sharded. Each rank reads from the file only its own ranges
 * (the file's CRC-32 was checked by readCheckpoint). Not collective.
 */
export function restoreWholeOptimizer(file: string, model: NativeModel, optimizer: NativeOptimizer): void {
  const fd = openSync(file, "r");
  try {
    const read = (at: number, n: number) => {
      const out = new Uint8Array(n);
      if (readSync(fd, out, 0, n, at) !== n)
        throw new CheckpointError(`${file} ends before byte ${at + n}`, { fix: FIX });
      return out;
    };
    const header = read(0, OPTIMIZER_HEADER_BYTES);
    const head = new DataView(header.buffer);
    const code = head.getBigInt64(24, true);
    const sb = code === STATE_CODE.f64 ? 8 : 4;
    const params = model.params();
    if (Number(head.getBigInt64(16, true)) !== params.length)
      throw new CheckpointError(
        `${file} holds the AdamW state of ${head.getBigInt64(16, true)} tensors, the model has ${params.length}`,
        { fix: FIX },
      );
    const start = new Map<string, number>(); // where each parameter's exp_avg begins
    let cursor = OPTIMIZER_HEADER_BYTES;
    for (const p of params) {
      const n = Number(new DataView(read(cursor, 8).buffer).getBigInt64(0, true));
      if (n !== numelOf(p.shape))
        throw new CheckpointError(`${file}: ${p.name} has ${n} elements of state, the model's ${numelOf(p.shape)}`, {
          fix: FIX,
        });
      start.set(p.name, cursor + 8);
      cursor += 8 + 2 * n * sb;
    }
    const layout = model.shardLayout();
    const image = new Uint8Array(OPTIMIZER_HEADER_BYTES + layout.units.reduce((n, u) => n + 8 + 2 * u.chunk * sb, 0));
    image.set(header);
    const view = new DataView(image.buffer);
    view.setBigInt64(16, BigInt(layout.units.length), true);
    let at = OPTIMIZER_HEADER_BYTES;
    for (const unit of layout.units) {
      view.setBigInt64(at, BigInt(unit.chunk), true);
      const [lo, hi] = rankRange(unit, layout.rank);
      for (const t of unit.params) {
        const n = numelOf(t.shape);
        const [a, b] = [Math.max(lo, t.offset), Math.min(hi, t.offset + n)];
        for (const half of b > a ? [0, 1] : []) {
          const from = start.get(t.name)! + (half * n + a - t.offset) * sb;
          image.set(read(from, (b - a) * sb), at + 8 + (half * unit.chunk + a - lo) * sb);
        }
      }
      at += 8 + 2 * unit.chunk * sb;
    }
    optimizer.loadState(image);
  } finally {
    closeSync(fd);
  }
}

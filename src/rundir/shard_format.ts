// The files of a sharded checkpoint (shard_checkpoint.ts writes them, shard_restore.ts reads them)
// and their checks, shared by the reader, `checkCheckpoint` and `rlx check`:
//
//   trainer/shards.json                 the layout and every piece's CRC-32 (ShardsFile below)
//   trainer/shards/rank_R.weights.bin   rank R's slice of every unit, in unit order: `chunk`
//                                       elements each (padding included), raw in `dtype`
//   trainer/shards/rank_R.optimizer.bin rank R's AdamW state image as the shim saves it
//                                       (native/src/optim.cpp): a 32-byte header (magic
//                                       "RLXADAM1", step, count = units, dtype code), then per
//                                       unit int64 `chunk`, exp_avg[chunk], exp_avg_sq[chunk]
//
// A unit's flat is its parameters end to end (each at its `offset`), padded with zeros to
// chunk * world; rank r holds [r * chunk, (r + 1) * chunk) of it (rlx.h, "Sharded training"). A
// piece is one tensor's part in one rank's range; each has a CRC-32 per file, so a damaged byte
// is named by file and tensor, and a reader checks exactly the pieces it reads.
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { crc32, hex } from "../model/checksums.ts";
import { type DType, DTYPE_BYTES } from "../data/dtypes.ts";

export const SHARDS_FILE = "trainer/shards.json";
export const SHARDS_DIR = "trainer/shards";
export const weightsFile = (rank: number) => `${SHARDS_DIR}/rank_${rank}.weights.bin`;
export const optimizerFile = (rank: number) => `${SHARDS_DIR}/rank_${rank}.optimizer.bin`;
export const OPTIMIZER_HEADER_BYTES = 32;
const FORMAT = 1;
const BLOCK = 16 << 20;

export interface ShardTensor {
  name: string;
  /** Where it starts in its unit's flat, in elements. */
  offset: number;
  shape: number[];
}

export interface ShardUnit {
  name: string;
  numel: number;
  chunk: number;
  params: ShardTensor[];
}

export interface RankShard {
  rank: number;
  weights: string;
  optimizer: string;
  /** Per unit, the elements [start, end) of its flat this rank holds, padding left out. */
  ranges: [number, number][];
  /** Tensor name -> CRC-32 of its piece: in the weights file, and exp_avg then exp_avg_sq in the optimizer file. */
  pieces: { weights: Record<string, string>; optimizer: Record<string, string> };
}

export interface ShardsFile {
  format: number;
  /** trainer.shard of the run that wrote it; any mode and world size reads it back. */
  mode: "optimizer" | "full";
  world: number;
  /** The weights' dtype and the AdamW state's (float64 for a float64 model, else float32). */
  dtype: DType;
  stateDtype: "f32" | "f64";
  /** AdamW updates applied so far (every rank's image agrees). */
  adamStep: number;
  units: ShardUnit[];
  ranks: RankShard[];
}

export const newShardsFile = (fields: Omit<ShardsFile, "format">): ShardsFile => ({ format: FORMAT, ...fields });

export const numelOf = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/** The elements [start, end) of a unit's flat that rank `rank` of `world` holds, padding left out. */
export function rankRange(unit: { numel: number; chunk: number }, rank: number): [number, number] {
  return [Math.min(rank * unit.chunk, unit.numel), Math.min((rank + 1) * unit.chunk, unit.numel)];
}

/** One tensor's part [start, end) (unit flat elements) inside `range`, or null when they miss. */
export function pieceOf(tensor: ShardTensor, range: readonly [number, number]): [number, number] | null {
  const start = Math.max(tensor.offset, range[0]);
  const end = Math.min(tensor.offset + numelOf(tensor.shape), range[1]);
  return start < end ? [start, end] : null;
}

/** Byte positions of each unit's slice in a rank's weights file, and of its exp_avg in the optimizer file. */
export function fileOffsets(units: readonly ShardUnit[], dtype: DType, stateDtype: DType) {
  const weights: number[] = [];
  const optimizer: number[] = [];
  let w = 0;
  let o = OPTIMIZER_HEADER_BYTES;
  for (const unit of units) {
    weights.push(w);
    optimizer.push(o + 8);
    w += unit.chunk * DTYPE_BYTES[dtype];
    o += 8 + 2 * unit.chunk * DTYPE_BYTES[stateDtype];
  }
  return { weights, optimizer, weightsBytes: w, optimizerBytes: o };
}

/** An open rank file that reads byte ranges, chaining their CRC-32 as it goes. */
export class RankFileReader {
  readonly #fd: number;
  constructor(readonly path: string) {
    this.#fd = openSync(path, "r");
  }

  /** Reads `length` bytes at `position` into `into` (or a new buffer); returns it and the CRC continued from `crc`. */
  read(position: number, length: number, crc = 0, into = new Uint8Array(length)): { bytes: Uint8Array; crc: number } {
    for (let done = 0; done < length;) {
      const n = readSync(this.#fd, into, done, length - done, position + done);
      if (n === 0) throw new Error(`${this.path}: ends before byte ${position + length}`);
      done += n;
    }
    return { bytes: into, crc: crc32(into.subarray(0, length), crc) };
  }

  /** The CRC-32 of `length` bytes at `position`, continued from `crc`, read in blocks. */
  crc(position: number, length: number, crc = 0): number {
    const block = new Uint8Array(Math.min(length, BLOCK));
    for (let done = 0; done < length; done += block.byteLength) {
      const n = Math.min(block.byteLength, length - done);
      crc = this.read(position + done, n, crc, block.subarray(0, n)).crc;
    }
    return crc;
  }

  close(): void {
    closeSync(this.#fd);
  }
}

/** The CRC-32 of each tensor's piece in one rank file (damage naming; see piece CRCs above). */
export function pieceCrcs(
  shards: ShardsFile,
  rank: RankShard,
  file: RankFileReader,
  which: "weights" | "optimizer",
): Record<string, string> {
  const offsets = fileOffsets(shards.units, shards.dtype, shards.stateDtype);
  const bytes = DTYPE_BYTES[which === "weights" ? shards.dtype : shards.stateDtype];
  const out: Record<string, string> = {};
  shards.units.forEach((unit, u) => {
    const first = rank.rank * unit.chunk;
    for (const tensor of unit.params) {
      const piece = pieceOf(tensor, rank.ranges[u]!);
      if (!piece) continue;
      const at = (which === "weights" ? offsets.weights[u]! : offsets.optimizer[u]!) + (piece[0] - first) * bytes;
      const length = (piece[1] - piece[0]) * bytes;
      let crc = file.crc(at, length);
      if (which === "optimizer") crc = file.crc(at + unit.chunk * bytes, length, crc);
      out[tensor.name] = hex(crc);
    }
  });
  return out;
}

/** Problems of shards.json itself: whether its ranks' ranges cover each unit exactly, and its tensors fit. */
export function checkShardsLayout(shards: ShardsFile): string[] {
  const problems: string[] = [];
  if (shards.format !== FORMAT) return [`${SHARDS_FILE} has format ${shards.format}, this rlx reads ${FORMAT}`];
  if (shards.ranks.length !== shards.world || shards.ranks.some((r, i) => r.rank !== i))
    problems.push(`${SHARDS_FILE} lists ${shards.ranks.length} ranks for world size ${shards.world}`);
  shards.units.forEach((unit, u) => {
    if (unit.chunk !== Math.ceil(unit.numel / shards.world))
      problems.push(
        `${SHARDS_FILE}: unit ${unit.name} has chunk ${unit.chunk} for ${unit.numel} elements on ${shards.world} ranks`,
      );
    let covered = 0;
    for (const rank of shards.ranks) {
      const range = rank.ranges[u];
      const want = rankRange(unit, rank.rank);
      if (!range || range[0] !== covered || range[0] !== want[0] || range[1] !== want[1])
        problems.push(`${SHARDS_FILE}: rank ${rank.rank}'s range of unit ${unit.name} is not [${want.join(", ")})`);
      covered = range?.[1] ?? covered;
    }
    if (covered !== unit.numel)
      problems.push(`${SHARDS_FILE}: the ranks cover ${covered} of unit ${unit.name}'s ${unit.numel} elements`);
    let end = 0;
    for (const tensor of [...unit.params].sort((a, b) => a.offset - b.offset)) {
      if (tensor.offset < end || tensor.offset + numelOf(tensor.shape) > unit.numel)
        problems.push(`${SHARDS_FILE}: tensor ${tensor.name} overlaps another or leaves unit ${unit.name}`);
      end = tensor.offset + numelOf(tensor.shape);
    }
    for (const rank of shards.ranks)
      for (const tensor of unit.params)
        if (
          rank.ranges[u] &&
          pieceOf(tensor, rank.ranges[u]!) &&
          !(tensor.name in rank.pieces.weights && tensor.name in rank.pieces.optimizer)
        )
          problems.push(`${SHARDS_FILE}: rank ${rank.rank} has no checksum for its piece of ${tensor.name}`);
  });
  return problems;
}

/** Reads trainer/shards.json of a checkpoint directory (throws when it does not parse). */
export function readShardsFile(dir: string): ShardsFile {
  return JSON.parse(readFileSync(join(dir, SHARDS_FILE), "utf8")) as ShardsFile;
}

/**
 * Problems of a sharded checkpoint's shards.json and rank files: the layout, each rank file's
 * size, and each piece's CRC-32 (naming file and tensor). `damaged` limits the piece checks to
 * files already known to be damaged (the manifest's whole-file CRC found them), since the pieces
 * are only there to name what is wrong.
 */
export function checkShards(dir: string, damaged?: ReadonlySet<string>): string[] {
  let shards: ShardsFile;
  try {
    shards = readShardsFile(dir);
  } catch (err) {
    return [`${SHARDS_FILE} does not parse: ${(err as Error).message}`];
  }
  const problems = checkShardsLayout(shards);
  if (problems.length > 0) return problems;
  const sizes = fileOffsets(shards.units, shards.dtype, shards.stateDtype);
  for (const rank of shards.ranks) {
    for (const which of ["weights", "optimizer"] as const) {
      const file = rank[which];
      const path = join(dir, file);
      const want = which === "weights" ? sizes.weightsBytes : sizes.optimizerBytes;
      if (!existsSync(path)) problems.push(`${file} is missing`);
      else if (statSync(path).size !== want)
        problems.push(`${file} has ${statSync(path).size} bytes, the layout needs ${want}`);
      else if (!damaged || damaged.has(file)) {
        const reader = new RankFileReader(path);
        try {
          const got = pieceCrcs(shards, rank, reader, which);
          const bad = Object.keys(rank.pieces[which]).filter((name) => got[name] !== rank.pieces[which][name]);
          if (bad.length)
            problems.push(`${file}: tensor${bad.length > 1 ? "s" : ""} ${bad.join(", ")} damaged (checksum mismatch)`);
        } finally {
          reader.close();
        }
      }
    }
  }
  return problems;
}

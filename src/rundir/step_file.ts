// The step file: one packed step batch, written by the orchestrator as `batches/step_N.bin` and
// read by the trainer (docs/architecture.md §2 transport). The layout is documented in docs/run-directory.md:
//
//   bytes 0-3    magic "RLXB"
//   bytes 4-7    u32 format version (5; versions 2, without the distill arrays, 3, without the
//                shared-prefix layout, and 4, without the loss table, are still read)
//   bytes 8-11   u32 header length H in bytes
//   bytes 12-15  u32 CRC-32 of every byte after these (header and data; version 1: 0)
//   16 .. 16+H   header: UTF-8 JSON, space-padded so the data starts at a multiple of 8
//   then         the rows' arrays, each starting at a multiple of 8, host (little-endian) order
//
// The header says where each array of each row lives ({dtype, offset, length}, offsets from the
// start of the data), so the reader makes typed-array views over one buffer with no per-token
// parsing, and any tool can read the file with a JSON parser and a byte slice.
//
// Atomic: the file is written as `step_N.bin.tmp-<pid>` and renamed into place, so the trainer
// (which polls for the final name) never sees half a batch, and a run killed mid-write leaves only
// a tmp file that the next start deletes. The CRC catches a file damaged on disk after that
// (truncated, or bytes flipped in place): the trainer refuses it, naming it, instead of training
// on wrong tokens or advantages.
import { readFileSync } from "node:fs";
import { ChecksumError, RlxError } from "../errors.ts";
import { crc32, hex } from "../model/checksums.ts";
import type { RlLoss } from "../data/loss_types.ts";
import type { ComponentCounts, PackedRow, PackedSampleInfo, PackedStep } from "../data/pack.ts";
import { writeFileAtomic } from "./paths.ts";

const MAGIC = "RLXB";
const FORMAT_VERSION = 5;
const READABLE_VERSIONS = new Set([2, 3, 4, 5]);
const PREAMBLE = 16;

type ArrayName =
  | "tokenIds"
  | "sampleLengths"
  | "sampleParents"
  | "sampleLosses"
  | "lossMask"
  | "advantages"
  | "inferenceLogprobs"
  | "temperatures"
  | "envIndex"
  | "refLogprobs"
  | "rlWeights"
  | "ceWeights"
  | "refKlWeights"
  | "distillWeights"
  | "distillBetas"
  | "distillIds"
  | "distillLogprobs";
type DType = "i32" | "u8" | "f32";

const ARRAYS: Record<ArrayName, DType> = {
  tokenIds: "i32",
  sampleLengths: "i32",
  sampleParents: "i32",
  sampleLosses: "i32",
  lossMask: "u8",
  advantages: "f32",
  inferenceLogprobs: "f32",
  temperatures: "f32",
  envIndex: "i32",
  refLogprobs: "f32",
  rlWeights: "f32",
  ceWeights: "f32",
  refKlWeights: "f32",
  distillWeights: "f32",
  distillBetas: "f32",
  distillIds: "i32",
  distillLogprobs: "f32",
};
const OPTIONAL = new Set<ArrayName>([
  "sampleParents",
  "sampleLosses",
  "refLogprobs",
  "rlWeights",
  "ceWeights",
  "refKlWeights",
  "distillWeights",
  "distillBetas",
  "distillIds",
  "distillLogprobs",
]);
/** Arrays of one entry per sample (segment), not per token. */
const PER_SAMPLE = new Set<ArrayName>(["sampleParents", "sampleLosses"]);
/** Arrays of distill_k entries per token (the teacher's top-k slots). */
const PER_SLOT = new Set<ArrayName>(["distillIds", "distillLogprobs"]);

interface ArrayRef {
  dtype: DType;
  /** Byte offset from the start of the data section. */
  offset: number;
  /** Number of elements. */
  length: number;
}

/** A packed sample's place in its row, plus the weights version that sampled its rollout. */
export interface BatchSample extends PackedSampleInfo {
  policyVersion: number;
}

interface RowHeader {
  tokens: number;
  /** Top-k slots per token of the distill arrays (absent: 0). */
  distill_k?: number;
  samples: Array<{
    rollout_id: string;
    env: string;
    start: number;
    length: number;
    /** The shared segment the sample continues: [start, length] (absent: none). */
    prefix?: [number, number];
    original_length: number;
    policy_version: number;
  }>;
  arrays: Partial<Record<ArrayName, ArrayRef>>;
}

interface Header {
  step: number;
  envs: string[];
  counts: ComponentCounts;
  tokens: number;
  /** Absent in files written before prefix sharing: 0. */
  shared_tokens?: number;
  truncated_samples: number;
  /** The rl loss table the rows' sampleLosses index (absent before format 5: [trainer.loss]). */
  losses?: RlLoss[];
  rows: RowHeader[];
  /** The orchestrator's state after cutting this batch, on checkpoint steps (checkpoint.ts). */
  state?: unknown;
  /** The orchestrator's metrics of this step; the trainer passes them on in its publish marker. */
  metrics?: Record<string, number>;
}

/** A packed row whose samples carry their policy version. */
export type BatchRow = Omit<PackedRow, "samples"> & { samples: BatchSample[] };

/** What a step file holds. */
export interface StepBatch {
  step: number;
  packed: Omit<PackedStep, "rows"> & { rows: BatchRow[] };
  /** The orchestrator's state, present on checkpoint steps. */
  state?: unknown;
  /** The orchestrator's metrics of this step (rewards, errors, staleness, batch shape, timings). */
  metrics?: Record<string, number>;
}

export class BatchFileError extends RlxError {}

const align8 = (n: number) => Math.ceil(n / 8) * 8;

function bytesOf(array: Int32Array | Uint8Array | Float32Array): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

/** Serializes a step batch to the bytes of a step file. */
export function encodeStepBatch(batch: StepBatch): Uint8Array {
  const chunks: Array<{ offset: number; bytes: Uint8Array }> = [];
  let dataBytes = 0;
  const rows: RowHeader[] = batch.packed.rows.map((row) => {
    const arrays: RowHeader["arrays"] = {};
    for (const [name, dtype] of Object.entries(ARRAYS) as Array<[ArrayName, DType]>) {
      const array = row[name];
      if (!array) continue;
      arrays[name] = { dtype, offset: dataBytes, length: array.length };
      chunks.push({ offset: dataBytes, bytes: bytesOf(array) });
      dataBytes = align8(dataBytes + array.byteLength);
    }
    const samples = row.samples.map((s) => ({
      rollout_id: s.rolloutId,
      env: s.env,
      start: s.start,
      length: s.length,
      ...(s.prefix ? { prefix: [s.prefix.start, s.prefix.length] as [number, number] } : {}),
      original_length: s.originalLength,
      policy_version: s.policyVersion,
    }));
    return { tokens: row.tokenIds.length, ...(row.distillK ? { distill_k: row.distillK } : {}), samples, arrays };
  });
  const header: Header = {
    step: batch.step,
    envs: batch.packed.envs,
    counts: batch.packed.counts,
    tokens: batch.packed.tokens,
    shared_tokens: batch.packed.sharedTokens,
    truncated_samples: batch.packed.truncatedSamples,
    ...(batch.packed.losses ? { losses: batch.packed.losses } : {}),
    rows,
    ...(batch.state === undefined ? {} : { state: batch.state }),
    ...(batch.metrics === undefined ? {} : { metrics: batch.metrics }),
  };
  const json = Buffer.from(JSON.stringify(header), "utf8");
  const headerBytes = align8(PREAMBLE + json.length) - PREAMBLE;
  const out = new Uint8Array(PREAMBLE + headerBytes + dataBytes);
  out.set(Buffer.from(MAGIC, "ascii"), 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, FORMAT_VERSION, true);
  view.setUint32(8, headerBytes, true);
  out.set(json, PREAMBLE);
  out.fill(0x20, PREAMBLE + json.length, PREAMBLE + headerBytes);
  const dataStart = PREAMBLE + headerBytes;
  for (const chunk of chunks) out.set(chunk.bytes, dataStart + chunk.offset);
  view.setUint32(12, crc32(out.subarray(PREAMBLE)), true);
  return out;
}

function view(
  buffer: ArrayBuffer,
  start: number,
  ref: ArrayRef,
  file: string,
  what: string,
): Int32Array | Uint8Array | Float32Array {
  const size = ref.dtype === "u8" ? 1 : 4;
  if (start + ref.offset + ref.length * size > buffer.byteLength)
    throw new BatchFileError(`${file}: ${what} runs past the end of the file (truncated?)`);
  if (ref.dtype === "i32") return new Int32Array(buffer, start + ref.offset, ref.length);
  if (ref.dtype === "u8") return new Uint8Array(buffer, start + ref.offset, ref.length);
  return new Float32Array(buffer, start + ref.offset, ref.length);
}

/** A row's loss codes must index the step's table (a code past it would read another sample's loss). */
function checkLossCodes(codes: Int32Array | undefined, losses: readonly RlLoss[] | undefined, where: string): void {
  if (!codes) return;
  const n = losses?.length ?? 0;
  for (const code of codes)
    if (code < 0 || code >= Math.max(1, n))
      throw new BatchFileError(`${where} sampleLosses holds ${code}; the step's loss table has ${n} entries`);
}

/** Parses the bytes of a step file; `file` names it in errors. */
export function decodeStepBatch(bytes: Uint8Array, file = "step file"): StepBatch {
  // An own, 8-aligned buffer: typed-array views need aligned offsets, and a pooled Buffer's may not be.
  const buffer = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(buffer).set(bytes);
  if (bytes.byteLength < PREAMBLE || Buffer.from(buffer, 0, 4).toString("ascii") !== MAGIC) {
    throw new BatchFileError(`${file}: not an rlx step file (bad magic)`, {
      fix: "step files are written by `rlx train`; delete stray files in batches/",
    });
  }
  const dv = new DataView(buffer);
  const version = dv.getUint32(4, true);
  if (!READABLE_VERSIONS.has(version))
    throw new BatchFileError(`${file}: step file format ${version}, this rlx reads ${FORMAT_VERSION}`, {
      fix: "run the trainer and orchestrator from the same rlx build",
    });
  const headerBytes = dv.getUint32(8, true);
  if (PREAMBLE + headerBytes > bytes.byteLength)
    throw new BatchFileError(`${file}: header runs past the end of the file (truncated?)`);
  const crc = crc32(bytes.subarray(PREAMBLE)) >>> 0;
  if (crc !== dv.getUint32(12, true))
    throw new ChecksumError(
      `${file}: checksum mismatch (crc32 ${hex(crc)}, written as ${hex(dv.getUint32(12, true))}): the step file was truncated or damaged after it was written`,
      { fix: "resume the run (rlx train CONFIG --resume): the step is sampled again from the last checkpoint" },
    );
  const header = JSON.parse(Buffer.from(buffer, PREAMBLE, headerBytes).toString("utf8")) as Header;
  const dataStart = PREAMBLE + headerBytes;
  const rows = header.rows.map((rh, r) => {
    const arrays: Partial<Record<ArrayName, Int32Array | Uint8Array | Float32Array>> = {};
    for (const name of Object.keys(ARRAYS) as ArrayName[]) {
      const ref = rh.arrays[name];
      if (!ref) {
        if (OPTIONAL.has(name)) continue;
        throw new BatchFileError(`${file}: row ${r} has no ${name}`);
      }
      if (ref.dtype !== ARRAYS[name])
        throw new BatchFileError(`${file}: row ${r} ${name} is ${ref.dtype}, expected ${ARRAYS[name]}`);
      const k = rh.distill_k ?? 0;
      const segments = rh.arrays.sampleLengths?.length;
      const expected =
        name === "sampleLengths"
          ? ref.length
          : PER_SAMPLE.has(name)
            ? segments
            : PER_SLOT.has(name)
              ? rh.tokens * k
              : rh.tokens;
      if (ref.length !== expected)
        throw new BatchFileError(
          `${file}: row ${r} ${name} has ${ref.length} entries, the row has ` +
            (PER_SAMPLE.has(name) ? `${segments} samples` : `${rh.tokens} tokens`) +
            (PER_SLOT.has(name) ? ` of ${k} slots` : ""),
        );
      arrays[name] = view(buffer, dataStart, ref, file, `row ${r} ${name}`);
    }
    const samples: BatchSample[] = rh.samples.map((s) => ({
      rolloutId: s.rollout_id,
      env: s.env,
      start: s.start,
      length: s.length,
      ...(s.prefix ? { prefix: { start: s.prefix[0], length: s.prefix[1] } } : {}),
      originalLength: s.original_length,
      policyVersion: s.policy_version,
    }));
    checkLossCodes(arrays.sampleLosses as Int32Array | undefined, header.losses, `${file}: row ${r}`);
    const distill = rh.distill_k ? { distillK: rh.distill_k } : {};
    return { ...(arrays as unknown as Omit<PackedRow, "samples">), ...distill, samples };
  });
  return {
    step: header.step,
    packed: {
      rows,
      envs: header.envs,
      counts: header.counts,
      tokens: header.tokens,
      sharedTokens: header.shared_tokens ?? 0,
      truncatedSamples: header.truncated_samples,
      ...(header.losses ? { losses: header.losses } : {}),
    },
    ...(header.state === undefined ? {} : { state: header.state }),
    ...(header.metrics === undefined ? {} : { metrics: header.metrics }),
  };
}

/** Writes a step file atomically (tmp + rename). */
export function writeStepBatch(path: string, batch: StepBatch): void {
  writeFileAtomic(path, encodeStepBatch(batch));
}

export function readStepBatch(path: string): StepBatch {
  return decodeStepBatch(readFileSync(path), path);
}

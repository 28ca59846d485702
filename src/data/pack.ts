// Packing a step's training samples into rows for the trainer (docs/architecture.md §4; as
// prime-rl's trainer/batch.py). Each row is one micro-batch: flat typed arrays the native training call takes as they
// are, with no per-token JS objects on the hot path.
//
//   - Samples longer than seq_len are truncated (never split: a split sample would lose its
//     prefix's context); every per-token array is cut with it.
//   - First-fit decreasing: longest first, each into the first row with room.
//   - A stream present on any sample of a row is materialized for the whole row, with the
//     defaults filled in for samples that lack it (rl 1, ce 0, ref_kl 0, ref logprobs 0); a stream
//     no sample carries stays absent, so pure-GRPO rows keep the trainer's hot path.
//   - Optional padding to a multiple of `padMultiple` tokens: a trailing segment of its own (its
//     position ids restart at 0) with weight 0 in every stream, loss mask 0 and env index -1.
//   - The distill component's top-k (k slots per token) is materialized at the row's largest k;
//     a sample with a smaller k, or none, fills the extra slots with id -1 (empty).
//   - With `sharePrefixes`, samples that begin with the same weightless tokens (a group's prompt,
//     an env's system prompt) are packed as those tokens once plus each sample's own tokens after
//     them, the row's sampleParents pointing each at the shared segment (prefix_share.ts chooses;
//     rlx.h rlx_batch.sample_parents computes it). A unit of shared samples is never split over rows.
//   - Each sample's rl loss is a code into the step's loss table (PackedStep.losses), by its env
//     (PackOptions.lossCodes); the row's sampleLosses is materialized only when a sample of the row
//     has a code other than 0, shared-prefix and padding segments taking 0, so a run with one loss
//     writes the rows it wrote before per-env losses.
//   - The step's token counts per component (the global denominators' numerators) are counted over
//     the packed rows, after truncation, as the trainer sees them: a sample's first token has no
//     prediction and belongs to no component.
import type { RlLoss } from "./loss_types.ts";
import type { TrainRow } from "./train_row.ts";
import { type ShareUnit, shareUnits } from "./prefix_share.ts";
import type { TrainingSample } from "./types.ts";

export type StreamName = "rlWeights" | "ceWeights" | "refKlWeights" | "refLogprobs" | "distillWeights" | "distillBetas";
export const STREAM_FILL: Record<StreamName, number> = {
  rlWeights: 1,
  ceWeights: 0,
  refKlWeights: 0,
  refLogprobs: 0,
  distillWeights: 0,
  distillBetas: 0,
};
export const STREAMS = Object.keys(STREAM_FILL) as StreamName[];

export interface PackedSampleInfo {
  rolloutId: string;
  env: string;
  /** Offset of the sample's own segment in the row, and its length. */
  start: number;
  length: number;
  /** The shared segment the sample continues (its first tokens), when its prefix is shared. */
  prefix?: { start: number; length: number };
  /** Length before truncation (equal to `length` when it fit). */
  originalLength: number;
}

/** One packed micro-batch of T tokens (T <= seq_len, rounded up to padMultiple): the native
 * training call's row (sample lengths include the padding segment, if any) plus what the
 * orchestrator keeps about where each sample sits. */
export interface PackedRow extends TrainRow {
  /** Per token: index into PackedStep.envs; -1 on padding. */
  envIndex: Int32Array;
  samples: PackedSampleInfo[];
}

/** Member token counts of one component, summed over a step (before max(1, .)). */
export interface ComponentCounts {
  rl: number;
  ce: number;
  refKl: number;
  distill: number;
  /** Samples with at least one rl member: the sequence and constant reductions' denominator. */
  rlSequences: number;
}

export interface PackedStep {
  rows: PackedRow[];
  /** Env names; PackedRow.envIndex points here. */
  envs: string[];
  counts: ComponentCounts;
  /** Real (non-padding) tokens over all rows: a shared prefix counts once. */
  tokens: number;
  /** Tokens not computed again because samples share a prefix (0 without sharePrefixes). */
  sharedTokens: number;
  truncatedSamples: number;
  /** The rl losses the rows' sampleLosses index (each env's, docs/architecture.md §6). Absent (a
   * step file written before per-env losses): the trainer's [trainer.loss] for every sample. */
  losses?: RlLoss[];
}

export interface PackOptions {
  seqLen: number;
  /** Pad each row's length up to a multiple of this (1 = no padding). */
  padMultiple?: number;
  /** Token id written on padding positions. */
  padTokenId?: number;
  /** Hold the weightless prefix that samples share once per row (prefix_share.ts). */
  sharePrefixes?: boolean;
  /** Each env's index into the step's loss table (its samples' sampleLosses); absent env: 0. */
  lossCodes?: ReadonlyMap<string, number>;
}

/** Member counts of a packed row (docs/architecture.md §6 membership). The first token of each packed sample
 * is nobody's member: nothing in its sample predicts it, and the trainer drops it too. */
export function rowCounts(row: PackedRow): ComponentCounts {
  const counts = { rl: 0, ce: 0, refKl: 0, distill: 0, rlSequences: 0 };
  const { lossMask, rlWeights, ceWeights, refKlWeights, distillWeights } = row;
  let nextStart = 0;
  let k = 0;
  let sampleHasRl = false;
  for (let i = 0; i < row.tokenIds.length; i++) {
    if (i === nextStart) {
      nextStart += row.sampleLengths[k++] ?? 0;
      sampleHasRl = false;
      continue;
    }
    if (lossMask[i] && (!rlWeights || rlWeights[i] !== 0)) {
      counts.rl++;
      if (!sampleHasRl) counts.rlSequences++;
      sampleHasRl = true;
    }
    if (ceWeights && ceWeights[i] !== 0) counts.ce++;
    if (refKlWeights && refKlWeights[i] !== 0) counts.refKl++;
    if (distillWeights && distillWeights[i] !== 0) counts.distill++;
  }
  return counts;
}

/** Member counts summed over rows (a step's, or one rank's share of it). */
export function stepCounts(rows: readonly PackedRow[]): ComponentCounts {
  const total = { rl: 0, ce: 0, refKl: 0, distill: 0, rlSequences: 0 };
  for (const row of rows) {
    const c = rowCounts(row);
    total.rl += c.rl;
    total.ce += c.ce;
    total.refKl += c.refKl;
    total.distill += c.distill;
    total.rlSequences += c.rlSequences;
  }
  return total;
}

/** First-fit decreasing: bins of sample indices, each bin's lengths summing to at most seqLen. */
export function firstFitDecreasing(lengths: readonly number[], seqLen: number): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
  const bins: { used: number; items: number[] }[] = [];
  for (const i of order) {
    const len = lengths[i]!;
    const bin = bins.find((b) => b.used + len <= seqLen);
    if (bin) {
      bin.used += len;
      bin.items.push(i);
    } else bins.push({ used: len, items: [i] });
  }
  return bins.map((b) => b.items);
}

/** A row of zeros for segments of these lengths, padded to a multiple of `padMultiple` (the padding
 * is one more segment), with the given weight streams: every stream 0 (padding's weight), temperature
 * 1, env -1 until the caller copies the samples in; distillK > 0 adds the top-k slots, all empty.
 * parents: each segment's shared segment or -1 (sampleParents; absent when none is shared);
 * lossCodes: each segment's rl loss code (sampleLosses; absent when every one is 0). */
export function emptyRow(
  lengths: readonly number[],
  streams: readonly StreamName[],
  opts: { padMultiple?: number; padTokenId?: number },
  distillK = 0,
  parents: readonly number[] = [],
  lossCodes: readonly number[] = [],
): PackedRow {
  const used = lengths.reduce((a, b) => a + b, 0);
  const multiple = Math.max(1, opts.padMultiple ?? 1);
  const total = Math.ceil(used / multiple) * multiple;
  const row: PackedRow = {
    tokenIds: new Int32Array(total).fill(opts.padTokenId ?? 0),
    sampleLengths: Int32Array.from(total > used ? [...lengths, total - used] : lengths),
    lossMask: new Uint8Array(total),
    advantages: new Float32Array(total),
    inferenceLogprobs: new Float32Array(total),
    temperatures: new Float32Array(total).fill(1),
    envIndex: new Int32Array(total).fill(-1),
    samples: [],
  };
  for (const name of streams) row[name] = new Float32Array(total);
  if (parents.some((p) => p >= 0)) {
    row.sampleParents = new Int32Array(row.sampleLengths.length).fill(-1);
    row.sampleParents.set(parents);
  }
  if (lossCodes.some((c) => c !== 0)) {
    row.sampleLosses = new Int32Array(row.sampleLengths.length);
    row.sampleLosses.set(lossCodes);
  }
  if (distillK > 0) {
    row.distillK = distillK;
    row.distillIds = new Int32Array(total * distillK).fill(-1);
    row.distillLogprobs = new Float32Array(total * distillK);
  }
  return row;
}

/** Copies `length` tokens of top-k slots (k per token) from `from` (at token `src`) into row's
 * (at token `dst`), widening each token to the row's k with empty slots. */
export function copyDistillSlots(
  row: PackedRow,
  dst: number,
  from: { k: number; ids: ArrayLike<number>; logprobs: ArrayLike<number> },
  src: number,
  length: number,
): void {
  const K = row.distillK ?? 0;
  if (from.k > K) throw new Error(`copyDistillSlots: the source's k ${from.k} exceeds the row's ${K}`);
  for (let t = 0; t < length; t++) {
    for (let j = 0; j < from.k; j++) {
      row.distillIds![(dst + t) * K + j] = from.ids[(src + t) * from.k + j]!;
      row.distillLogprobs![(dst + t) * K + j] = from.logprobs[(src + t) * from.k + j]!;
    }
  }
}

/** Copies tokens [from, from + length) of a sample into the row at `offset`. */
function copySample(
  row: PackedRow,
  sample: TrainingSample,
  from: number,
  length: number,
  offset: number,
  env: number,
): void {
  const to = from + length;
  row.tokenIds.set(sample.tokenIds.slice(from, to), offset);
  row.lossMask.set(sample.lossMask.slice(from, to), offset);
  row.advantages.set(sample.advantages.slice(from, to), offset);
  row.inferenceLogprobs.set(sample.inferenceLogprobs.slice(from, to), offset);
  row.temperatures.set(sample.temperatures.slice(from, to), offset);
  row.envIndex.fill(env, offset, offset + length);
  for (const name of STREAMS) {
    const stream = row[name];
    if (!stream) continue;
    const values = sample[name];
    if (values) stream.set(values.slice(from, to), offset);
    else stream.fill(STREAM_FILL[name], offset, offset + length);
  }
  if (sample.distillTargets) copyDistillSlots(row, offset, sample.distillTargets, from, length);
}

function buildRow(
  units: readonly ShareUnit[],
  samples: readonly TrainingSample[],
  lengths: readonly number[],
  envIds: Map<string, number>,
  opts: PackOptions,
): PackedRow {
  const segments: number[] = [];
  const parents: number[] = [];
  const codes: number[] = [];
  for (const unit of units) {
    const parent = unit.shared ? segments.length : -1;
    if (unit.shared) (segments.push(unit.shared), parents.push(-1), codes.push(0));
    for (const i of unit.members) {
      segments.push(lengths[i]! - unit.shared);
      parents.push(parent);
      codes.push(opts.lossCodes?.get(samples[i]!.env) ?? 0);
    }
  }
  const members = units.flatMap((u) => u.members.map((i) => samples[i]!));
  const row = emptyRow(
    segments,
    STREAMS.filter((name) => members.some((s) => s[name])),
    opts,
    Math.max(0, ...members.map((s) => s.distillTargets?.k ?? 0)),
    parents,
    codes,
  );
  let offset = 0;
  for (const unit of units) {
    const first = samples[unit.members[0]!]!;
    const prefix = unit.shared ? { start: offset, length: unit.shared } : undefined;
    if (prefix) (copySample(row, first, 0, unit.shared, offset, envIds.get(first.env)!), (offset += unit.shared));
    for (const i of unit.members) {
      const sample = samples[i]!;
      const length = lengths[i]! - unit.shared;
      copySample(row, sample, unit.shared, length, offset, envIds.get(sample.env)!);
      row.samples.push({
        rolloutId: sample.rolloutId,
        env: sample.env,
        start: offset,
        length,
        ...(prefix ? { prefix } : {}),
        originalLength: sample.tokenIds.length,
      });
      offset += length;
    }
  }
  return row;
}

/** Packs a step's samples into rows and counts each component's members over the whole step. */
export function packStep(all: readonly TrainingSample[], opts: PackOptions): PackedStep {
  const samples = all.filter((s) => s.tokenIds.length > 0);
  const lengths = samples.map((s) => Math.min(s.tokenIds.length, opts.seqLen));
  const envs = [...new Set(samples.map((s) => s.env))];
  const envIds = new Map(envs.map((env, i) => [env, i]));
  const units = opts.sharePrefixes
    ? shareUnits(samples, lengths, opts.seqLen)
    : samples.map((_, i) => ({ members: [i], shared: 0, tokens: lengths[i]! }));
  const rows = firstFitDecreasing(
    units.map((u) => u.tokens),
    opts.seqLen,
  ).map((bin) =>
    buildRow(
      bin.map((u) => units[u]!),
      samples,
      lengths,
      envIds,
      opts,
    ),
  );
  return {
    rows,
    envs,
    counts: stepCounts(rows),
    tokens: units.reduce((n, u) => n + u.tokens, 0),
    sharedTokens: units.reduce((n, u) => n + (u.members.length - 1) * u.shared, 0),
    truncatedSamples: samples.filter((s, i) => s.tokenIds.length > lengths[i]!).length,
  };
}

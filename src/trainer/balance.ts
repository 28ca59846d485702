// Rank-aware packing (as prime-rl's trainer/batch.py packs micro-batches): a packed step's micro-batches spread over
// data-parallel ranks by estimated compute, every rank getting the same number of micro-batches.
//
//   1. Cost model: cost(row) = a * Σn + b * Σn² over the row's segment lengths n (padding included:
//      it is computed too), a = linear FLOPs per token, b = attention FLOPs per token pair, from
//      the model config. Quadratic attention is why a row of one 32-token sample costs more than a
//      row of two 16-token ones with the same token count.
//   2. Split-to-align: while there are fewer rows than max(ceil(rows / W) * W, W), the costliest
//      row holding several samples is split in two (LPT: heaviest sample onto the lighter side).
//      Only when no row can be split are dummy rows added: one token, no member tokens, so a zero
//      loss and a zero gradient.
//   3. Partition: equal-cardinality Karmarkar–Karp differencing (W sets per group of W rows, groups
//      merged pairing heavy sets with light ones), then swaps between the heaviest and lightest
//      rank while a swap narrows their gap.
//
// The documented bound: max load − min load <= the costliest single row. The swap phase guarantees
// it (if the gap were larger, some swap between those two ranks would narrow it) and the sum of
// squared loads falls with every swap, so the phase ends.
//
// Every rank runs this on the same step and must get the same answer: it is deterministic (no
// randomness, ties broken by index), and the trainer cross-checks the all-reduced token counts.
import type { ShimModelConfig } from "../native/model.ts";
import { copyDistillSlots, emptyRow, type PackedRow, type PackedStep, STREAMS } from "../data/pack.ts";

export interface CostModel {
  /** FLOPs per token (linear layers and the LM head). */
  a: number;
  /** FLOPs per token pair inside one sample (attention). */
  b: number;
}

/** prime-rl's `build_bin_cost`, for a dense Llama/Qwen decoder. */
export function costModelOf(config: ShimModelConfig): CostModel {
  const h = config.hidden_size;
  const hd = config.head_dim;
  const qkv = 2 * h * (config.num_attention_heads + 2 * config.num_key_value_heads) * hd;
  const out = 2 * config.num_attention_heads * hd * h;
  const mlp = 6 * h * config.intermediate_size;
  return {
    a: config.num_hidden_layers * (qkv + out + mlp) + 2 * h * config.vocab_size,
    b: config.num_hidden_layers * 2 * config.num_attention_heads * hd,
  };
}

/** The token count: what balancing falls back to without a model config. */
export const TOKEN_COST: CostModel = { a: 1, b: 0 };

export function lengthsCost(lengths: ArrayLike<number>, cost: CostModel): number {
  let total = 0;
  for (let i = 0; i < lengths.length; i++) total += cost.a * lengths[i]! + cost.b * lengths[i]! * lengths[i]!;
  return total;
}

/** A row's cost; a continuation of a shared prefix also attends to the prefix's keys. */
export function rowCost(row: PackedRow, cost: CostModel): number {
  const n = row.sampleLengths;
  let total = lengthsCost(n, cost);
  const parents = row.sampleParents;
  if (parents) for (let i = 0; i < n.length; i++) if (parents[i]! >= 0) total += cost.b * n[i]! * n[parents[i]!]!;
  return total;
}

export interface BalanceOptions {
  /** Pad rows made by splitting to a multiple of this (as packStep's padMultiple). */
  padMultiple?: number;
  padTokenId?: number;
}

export interface RankPlan {
  /** ranks[r]: the rows rank r trains; every rank has the same number. */
  ranks: PackedRow[][];
  /** Estimated cost per rank. */
  loads: number[];
  /** Rows split to align the count, and dummy rows added. */
  splits: number;
  dummies: number;
}

/** Every per-token array of a row (the distill slots are copied apart: k per token). */
const ROW_ARRAYS = [
  "tokenIds",
  "lossMask",
  "advantages",
  "inferenceLogprobs",
  "temperatures",
  "envIndex",
  ...STREAMS,
] as const;

/** Each sample's rl loss code in `row` by its segment's start (sampleLosses absent: none). */
function lossCodesByStart(row: PackedRow): Map<number, number> {
  const codes = new Map<number, number>();
  if (!row.sampleLosses) return codes;
  let start = 0;
  for (let i = 0; i < row.sampleLengths.length; i++) {
    codes.set(start, row.sampleLosses[i]!);
    start += row.sampleLengths[i]!;
  }
  return codes;
}

/** A row of the given samples of `row` (indices into row.samples), repacked in that order; a
 * shared prefix comes along once, before the first of its samples. The samples keep their rl loss
 * codes (sampleLosses, materialized as packStep does: only when one is not 0). */
export function sliceRow(row: PackedRow, picks: readonly number[], opts: BalanceOptions = {}): PackedRow {
  const spans: { from: number; length: number; parent: number; sample?: number }[] = [];
  const prefixes = new Map<number, number>(); // prefix start in `row` -> its span
  for (const k of picks) {
    const s = row.samples[k]!;
    let parent = -1;
    if (s.prefix) {
      parent = prefixes.get(s.prefix.start) ?? spans.length;
      if (parent === spans.length) {
        prefixes.set(s.prefix.start, parent);
        spans.push({ from: s.prefix.start, length: s.prefix.length, parent: -1 });
      }
    }
    spans.push({ from: s.start, length: s.length, parent, sample: k });
  }
  const codes = lossCodesByStart(row);
  const out = emptyRow(
    spans.map((x) => x.length),
    STREAMS.filter((name) => row[name]),
    opts,
    row.distillK ?? 0,
    spans.map((x) => x.parent),
    spans.map((x) => (x.sample === undefined ? 0 : (codes.get(x.from) ?? 0))),
  );
  const starts: number[] = [];
  let offset = 0;
  for (const span of spans) {
    for (const name of ROW_ARRAYS) {
      const src = row[name];
      if (src) out[name]!.set(src.subarray(span.from, span.from + span.length), offset);
    }
    if (row.distillK)
      copyDistillSlots(
        out,
        offset,
        { k: row.distillK, ids: row.distillIds!, logprobs: row.distillLogprobs! },
        span.from,
        span.length,
      );
    starts.push(offset);
    if (span.sample !== undefined) {
      const s = row.samples[span.sample]!;
      const prefix = span.parent >= 0 ? { start: starts[span.parent]!, length: spans[span.parent]!.length } : undefined;
      out.samples.push({ ...s, start: offset, ...(prefix ? { prefix } : {}) });
    }
    offset += span.length;
  }
  return out;
}

/** Splits a multi-sample row in two by LPT over the samples' costs. */
export function splitRow(row: PackedRow, cost: CostModel, opts: BalanceOptions = {}): [PackedRow, PackedRow] {
  const order = row.samples.map((_, k) => k).sort((x, y) => row.samples[y]!.length - row.samples[x]!.length || x - y);
  const sides: [number[], number[]] = [[], []];
  const loads = [0, 0];
  for (const k of order) {
    const side = loads[0]! <= loads[1]! ? 0 : 1;
    sides[side].push(k);
    loads[side]! += lengthsCost([row.samples[k]!.length], cost);
  }
  const byStart = (ks: number[]) => ks.sort((x, y) => x - y);
  return [sliceRow(row, byStart(sides[0]), opts), sliceRow(row, byStart(sides[1]), opts)];
}

/** One token, no member tokens, no streams: a zero loss and a zero gradient. */
export function dummyRow(opts: BalanceOptions = {}): PackedRow {
  return emptyRow([Math.max(1, opts.padMultiple ?? 1)], [], opts);
}

/** Splits, then dummies, until the row count is max(ceil(n / W) * W, W). */
export function alignRows(rows: readonly PackedRow[], worldSize: number, cost: CostModel, opts: BalanceOptions = {}) {
  const target = Math.max(Math.ceil(rows.length / worldSize) * worldSize, worldSize);
  const out = [...rows];
  let splits = 0;
  let dummies = 0;
  while (out.length < target) {
    let best = -1;
    for (let i = 0; i < out.length; i++) {
      if (out[i]!.samples.length >= 2 && (best < 0 || rowCost(out[i]!, cost) > rowCost(out[best]!, cost))) best = i;
    }
    if (best < 0) {
      out.push(dummyRow(opts));
      dummies++;
    } else {
      out.splice(best, 1, ...splitRow(out[best]!, cost, opts));
      splits++;
    }
  }
  return { rows: out, splits, dummies };
}

interface Solution {
  sets: { load: number; items: number[] }[];
}

const spread = (s: Solution) => s.sets[0]!.load - s.sets[s.sets.length - 1]!.load;
function sortSets(s: Solution): Solution {
  s.sets.sort((x, y) => y.load - x.load || x.items[0]! - y.items[0]!);
  return s;
}

/** Equal-cardinality Karmarkar–Karp over `costs.length` (a multiple of W) items, then swaps. */
export function balancedPartition(costs: readonly number[], worldSize: number): number[][] {
  if (costs.length % worldSize !== 0)
    throw new Error(`balancedPartition: ${costs.length} items do not split evenly over ${worldSize} ranks`);
  const order = costs.map((_, i) => i).sort((x, y) => costs[y]! - costs[x]! || x - y);
  let pool: Solution[] = [];
  for (let g = 0; g < order.length; g += worldSize) {
    const sets = order.slice(g, g + worldSize).map((i) => ({ load: costs[i]!, items: [i] }));
    pool.push(sortSets({ sets }));
  }
  while (pool.length > 1) {
    pool.sort((x, y) => spread(y) - spread(x) || x.sets[0]!.items[0]! - y.sets[0]!.items[0]!);
    const [first, second] = [pool[0]!, pool[1]!];
    const sets = first.sets.map((s, j) => {
      const other = second.sets[worldSize - 1 - j]!;
      return { load: s.load + other.load, items: [...s.items, ...other.items] };
    });
    pool = [sortSets({ sets }), ...pool.slice(2)];
  }
  const sets = pool[0]?.sets ?? Array.from({ length: worldSize }, () => ({ load: 0, items: [] }));
  refineBySwaps(sets, costs);
  return sets.map((s) => s.items);
}

/** Swaps one item between the heaviest and the lightest set while that narrows their gap. */
function refineBySwaps(sets: { load: number; items: number[] }[], costs: readonly number[]): void {
  for (let iter = 0; iter < 100 * costs.length + 10; iter++) {
    let hi = 0;
    let lo = 0;
    sets.forEach((s, i) => {
      if (s.load > sets[hi]!.load) hi = i;
      if (s.load < sets[lo]!.load) lo = i;
    });
    const gap = sets[hi]!.load - sets[lo]!.load;
    let best: [number, number] | null = null;
    let bestAfter = gap;
    for (const [x, ix] of sets[hi]!.items.entries()) {
      for (const [y, iy] of sets[lo]!.items.entries()) {
        const delta = costs[ix]! - costs[iy]!;
        const after = Math.abs(gap - 2 * delta);
        if (delta > 0 && delta < gap && after < bestAfter) [best, bestAfter] = [[x, y], after];
      }
    }
    if (!best) return;
    const [x, y] = best;
    const [ix, iy] = [sets[hi]!.items[x]!, sets[lo]!.items[y]!];
    sets[hi]!.items[x] = iy;
    sets[lo]!.items[y] = ix;
    sets[hi]!.load += costs[iy]! - costs[ix]!;
    sets[lo]!.load += costs[ix]! - costs[iy]!;
  }
}

/** A step's rows over worldSize ranks: aligned, balanced, the same count on every rank. */
export function balanceStep(step: PackedStep, worldSize: number, cost: CostModel, opts: BalanceOptions = {}): RankPlan {
  if (!Number.isInteger(worldSize) || worldSize < 1)
    throw new Error(`worldSize must be a positive integer, got ${worldSize}`);
  const { rows, splits, dummies } = alignRows(step.rows, worldSize, cost, opts);
  const costs = rows.map((row) => rowCost(row, cost));
  const parts = balancedPartition(costs, worldSize);
  return {
    ranks: parts.map((items) => items.map((i) => rows[i]!)),
    loads: parts.map((items) => items.reduce((sum, i) => sum + costs[i]!, 0)),
    splits,
    dummies,
  };
}

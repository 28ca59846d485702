// Rank-aware packing (src/trainer/balance.ts, as prime-rl's trainer/batch.py): over a table of sample
// lengths on 2 and 4 ranks, every rank gets the same number of rows, every sample lands on exactly
// one rank with its tokens and streams intact, the member counts are unchanged, and the loads meet
// the documented bound (max - min <= the costliest row). Plus prime-rl's own examples, the cost
// model against hand-computed FLOPs, dummies, and determinism (every rank computes the plan).
import { describe, expect, test } from "bun:test";
import type { ShimModelConfig } from "../../../src/native/model.ts";
import {
  balancedPartition,
  balanceStep,
  type CostModel,
  costModelOf,
  dummyRow,
  rowCost,
  TOKEN_COST,
} from "../../../src/trainer/balance.ts";
import { packStep, type PackedRow, type PackedStep, rowCounts } from "../../../src/data/pack.ts";
import type { TrainingSample } from "../../../src/data/types.ts";
import { rng } from "../../fixtures/rollouts.ts";

/** A sample whose token ids encode (id, position), with an rl mask after 1/3 and a ce stream on every third id. */
function sample(id: number, n: number): TrainingSample {
  const mask = Array.from({ length: n }, (_, i) => (i >= n / 3 ? 1 : 0));
  const s: TrainingSample = {
    tokenIds: Array.from({ length: n }, (_, i) => id * 1000 + i),
    lossMask: mask,
    advantages: mask.map((m) => m * (id % 2 ? 1 : -1)),
    inferenceLogprobs: mask.map((m) => -m),
    temperatures: mask.map(() => 1),
    env: id % 2 ? "a" : "b",
    rolloutId: `s${id}`,
  };
  return id % 3 === 0 ? { ...s, ceWeights: mask.map((m) => 0.5 * m) } : s;
}

const stepOf = (lengths: number[], seqLen: number) =>
  packStep(
    lengths.map((n, i) => sample(i, n)),
    { seqLen },
  );

const randomLengths = (seed: number, n: number, min: number, max: number) => {
  const r = rng(seed);
  return Array.from({ length: n }, () => min + Math.floor(r() * (max - min + 1)));
};

const QWEN_LIKE: ShimModelConfig = {
  vocab_size: 1000,
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 1e4,
  max_position_embeddings: 512,
  tie_word_embeddings: false,
  attention_bias: false,
  qk_norm: false,
};
const FLOPS = costModelOf(QWEN_LIKE);

/** The samples of a row, with the token ids and streams each carries (a shared prefix's first). */
function contents(row: PackedRow) {
  return row.samples.map((s) => {
    const cut = <T extends ArrayLike<number>>(a: T | undefined) =>
      a
        ? [
            ...(s.prefix ? Array.from(a).slice(s.prefix.start, s.prefix.start + s.prefix.length) : []),
            ...Array.from(a).slice(s.start, s.start + s.length),
          ]
        : undefined;
    return {
      id: s.rolloutId,
      tokens: cut(row.tokenIds),
      mask: cut(row.lossMask),
      adv: cut(row.advantages),
      ce: cut(row.ceWeights) ?? cut(row.lossMask)!.map(() => 0),
      env: cut(row.envIndex),
    };
  });
}

function checkPlan(step: PackedStep, worldSize: number, cost: CostModel) {
  const plan = balanceStep(step, worldSize, cost);
  const counts = plan.ranks.map((rows) => rows.length);
  expect(new Set(counts).size).toBe(1);
  expect(counts[0]! * worldSize).toBe(Math.max(worldSize, Math.ceil(step.rows.length / worldSize) * worldSize));
  // Every sample exactly once, unchanged.
  const before = step.rows.flatMap(contents).sort((x, y) => x.id.localeCompare(y.id));
  const after = plan.ranks
    .flat()
    .flatMap(contents)
    .sort((x, y) => x.id.localeCompare(y.id));
  expect(after).toEqual(before);
  // The step's member counts (the loss denominators) are those of the rows before balancing.
  const total = { rl: 0, ce: 0, refKl: 0, distill: 0, rlSequences: 0 };
  for (const row of plan.ranks.flat()) {
    const c = rowCounts(row);
    total.rl += c.rl;
    total.ce += c.ce;
    total.refKl += c.refKl;
    total.rlSequences += c.rlSequences;
  }
  expect(total).toEqual(step.counts);
  // Loads: as reported, and within the documented bound.
  plan.ranks.forEach((rows, r) =>
    expect(plan.loads[r]).toBeCloseTo(
      rows.reduce((s, row) => s + rowCost(row, cost), 0),
      6,
    ),
  );
  const maxRow = Math.max(...plan.ranks.flat().map((row) => rowCost(row, cost)));
  expect(Math.max(...plan.loads) - Math.min(...plan.loads)).toBeLessThanOrEqual(maxRow * (1 + 1e-12));
  return plan;
}

const TABLE: { name: string; lengths: number[]; seqLen: number }[] = [
  { name: "prime-rl 100/90/80/70", lengths: [100, 90, 80, 70], seqLen: 100 },
  { name: "40 random 5..200 tokens", lengths: randomLengths(1, 40, 5, 200), seqLen: 256 },
  { name: "200 random 1..512 tokens", lengths: randomLengths(2, 200, 1, 512), seqLen: 512 },
  { name: "one long, many short", lengths: [256, ...Array<number>(16).fill(16)], seqLen: 256 },
  { name: "equal lengths", lengths: Array<number>(13).fill(64), seqLen: 128 },
  { name: "fewer samples than ranks", lengths: [10, 20], seqLen: 64 },
  { name: "single-sample rows, not a multiple of W", lengths: [60, 50, 40, 30, 20], seqLen: 64 },
  { name: "empty step", lengths: [], seqLen: 64 },
];

describe("balanceStep over a table of sample lengths", () => {
  for (const { name, lengths, seqLen } of TABLE) {
    for (const world of [2, 4]) {
      for (const [costName, cost] of [
        ["tokens", TOKEN_COST],
        ["flops", FLOPS],
      ] as const) {
        test(`${name}: ${world} ranks, ${costName}`, () => {
          checkPlan(stepOf(lengths, seqLen), world, cost);
        });
      }
    }
  }

  test("groups sharing their prompts: a prefix travels with each of its samples, on 1, 2 and 4 ranks", () => {
    // 6 groups of 8 sharing a 40-token prompt, then 1..60 tokens each: units of up to 8 samples.
    const lengths = randomLengths(4, 48, 41, 100);
    const samples = lengths.map((n, i) => {
      const s = sample(i, n);
      const prompt = Array.from({ length: 40 }, (_, t) => 900_000 + Math.floor(i / 8) * 100 + t);
      const weightless = (w: number[] | undefined) => w?.map((x, t) => (t <= 40 ? 0 : x));
      return {
        ...s,
        tokenIds: [...prompt, ...s.tokenIds.slice(40)],
        lossMask: weightless(s.lossMask)!,
        ceWeights: weightless(s.ceWeights),
      };
    });
    const step = packStep(samples, { seqLen: 512, sharePrefixes: true });
    expect(step.rows.some((r) => r.sampleParents)).toBe(true);
    for (const world of [1, 2, 4]) {
      const plan = checkPlan(step, world, FLOPS);
      expect(
        plan.ranks
          .flat()
          .flatMap((r) => r.samples)
          .filter((s) => s.prefix).length,
      ).toBe(48);
    }
  });

  test("the plan is deterministic: the same on every rank", () => {
    const step = stepOf(randomLengths(3, 60, 1, 300), 300);
    expect(balanceStep(step, 4, FLOPS)).toEqual(balanceStep(stepOf(randomLengths(3, 60, 1, 300), 300), 4, FLOPS));
  });
});

describe("prime-rl's examples", () => {
  test("100/90/80/70 tokens on 2 ranks: [170, 170]", () => {
    const plan = checkPlan(stepOf([100, 90, 80, 70], 100), 2, TOKEN_COST);
    expect(plan.loads.sort()).toEqual([170, 170]);
  });

  test("6 samples on 4 ranks: split to 4 real rows, no dummy", () => {
    const plan = checkPlan(stepOf([10, 10, 10, 10, 10, 10], 64), 4, TOKEN_COST);
    expect(plan.dummies).toBe(0);
    expect(plan.splits).toBe(3); // one row of six -> four rows
    expect(plan.ranks.every((rows) => rows.length === 1 && rows[0]!.samples.length > 0)).toBe(true);
    expect(plan.ranks.map((rows) => rows[0]!.samples.length).sort()).toEqual([1, 1, 2, 2]);
  });

  test("FLOP-aware: each rank pairs a 32-token row with a [16, 16] row", () => {
    const step = stepOf([32, 32, 16, 16, 16, 16], 32);
    expect(step.rows.map((r) => Array.from(r.sampleLengths))).toEqual([[32], [32], [16, 16], [16, 16]]);
    const plan = checkPlan(step, 2, { a: 1, b: 1 });
    for (const rows of plan.ranks) expect(rows.map((r) => r.samples.length).sort()).toEqual([1, 2]);
    expect(plan.loads).toEqual([32 + 1024 + 32 + 512, 32 + 1024 + 32 + 512]);
  });
});

test("dummies fill the count when no row can be split, and have no member tokens", () => {
  const plan = checkPlan(stepOf([40, 30], 40), 4, TOKEN_COST);
  expect(plan.dummies).toBe(2);
  const dummies = plan.ranks.flat().filter((row) => row.samples.length === 0);
  expect(dummies).toHaveLength(2);
  for (const row of dummies) expect(rowCounts(row)).toEqual({ rl: 0, ce: 0, refKl: 0, distill: 0, rlSequences: 0 });
  const padded = dummyRow({ padMultiple: 8, padTokenId: 5 });
  expect(Array.from(padded.sampleLengths)).toEqual([8]);
  expect(Array.from(padded.tokenIds)).toEqual(Array(8).fill(5));
});

test("split rows are re-padded to padMultiple", () => {
  const step = packStep([sample(1, 10), sample(2, 7)], { seqLen: 32, padMultiple: 8 });
  expect(Array.from(step.rows[0]!.sampleLengths)).toEqual([10, 7, 7]);
  const plan = balanceStep(step, 2, TOKEN_COST, { padMultiple: 8 });
  const rows = plan.ranks.flat();
  expect(rows.map((r) => Array.from(r.sampleLengths)).sort()).toEqual([
    [10, 6],
    [7, 1],
  ]);
  for (const row of rows) {
    const pad = row.samples.reduce((n, s) => n + s.length, 0);
    expect(Array.from(row.lossMask.subarray(pad)).every((m) => m === 0)).toBe(true);
    expect(Array.from(row.envIndex.subarray(pad)).every((e) => e === -1)).toBe(true);
  }
});

test("balancedPartition: equal counts, the bound, and the optimum on small cases (brute force)", () => {
  const r = rng(7);
  for (let trial = 0; trial < 30; trial++) {
    const costs = Array.from({ length: 8 }, () => Math.floor(r() * 100) + 1);
    const parts = balancedPartition(costs, 2);
    expect(parts.map((p) => p.length)).toEqual([4, 4]);
    expect(parts.flat().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const loads = parts.map((p) => p.reduce((s, i) => s + costs[i]!, 0));
    const total = costs.reduce((a, b) => a + b, 0);
    let best = Infinity; // the best equal-count split: every 4-subset
    for (let mask = 0; mask < 256; mask++) {
      let bits = 0;
      let load = 0;
      for (let i = 0; i < 8; i++) if (mask & (1 << i)) (bits++, (load += costs[i]!));
      if (bits === 4) best = Math.min(best, Math.max(load, total - load));
    }
    expect(Math.max(...loads) - Math.min(...loads)).toBeLessThanOrEqual(Math.max(...costs));
    expect(Math.max(...loads)).toBeLessThanOrEqual(best + Math.max(...costs) / 2);
  }
  expect(() => balancedPartition([1, 2, 3], 2)).toThrow(/do not split evenly/);
});

test("cost model: a and b from the config by hand", () => {
  // per layer: qkv 2*64*(4+2*2)*16 = 16384, o 2*4*16*64 = 8192, mlp 6*64*128 = 49152; head 2*64*1000
  expect(FLOPS).toEqual({ a: 2 * (16384 + 8192 + 49152) + 128000, b: 2 * 2 * 4 * 16 });
});

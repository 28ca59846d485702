// Context parallelism (native/src/context.h): a row split along the sequence over C ranks trains
// to the same weights as the whole row on one rank, in float64, with packed samples of every loss
// component, shared prefixes, several replicas, a "full" sharded model and activation checkpointing.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distAvailable, ProcessGroup } from "../../src/native/dist.ts";
import { trainStep } from "../../src/native/train.ts";
import { LOSS, longStep, wideStep } from "./fixtures/dist_batch.ts";
import { runRanks, type ShardRankArgs, type ShardRankOutput } from "./fixtures/shard_rank.ts";
import { maxRel } from "./fixtures/shard_state.ts";
import { tinyModel } from "./tiny_model.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-context-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const gloo = await distAvailable("gloo");
let runs = 0;

async function run(worldSize: number, more: Partial<ShardRankArgs> = {}): Promise<ShardRankOutput[]> {
  const id = `${runs++}`;
  const store = { type: "file" as const, path: join(dir, `store-${id}`) };
  const outs = await runRanks(dir, id, { worldSize, store, shard: "none", ...more }, true);
  if (typeof outs === "string") throw new Error(`a rank failed:\n${outs}`);
  return outs;
}

function expectSame(outs: ShardRankOutput[], base: ShardRankOutput) {
  for (const out of outs) {
    expect(maxRel(out.params, base.params)).toBeLessThan(1e-10);
    for (const [i, norm] of base.gradNorms.entries())
      expect(Math.abs(out.gradNorms[i]! / norm - 1)).toBeLessThan(1e-10);
  }
}

describe.skipIf(!gloo)("a row split over C ranks trains as the whole row (float64)", () => {
  test("short rows of every loss component: C = 2, C = 4, 2 replicas of C = 2; a tied model with q/k norms", async () => {
    const [base] = await run(1);
    expectSame(await run(2, { contextParallel: 2 }), base!);
    expectSame(await run(4, { contextParallel: 4 }), base!);
    expectSame(await run(4, { contextParallel: 2 }), base!);
    // q/k norms, biases and an LM head tied to the embedding
    const [tied] = await run(1, { model: "tied" });
    expectSame(await run(2, { model: "tied", contextParallel: 2 }), tied!);
  }, 180_000);

  test("rows of 1.5k tokens with shared prefixes: C = 2 and 4, with checkpointing, with shard full", async () => {
    const step = longStep();
    expect(Math.max(...step.rows.map((r) => r.tokenIds.length))).toBeGreaterThan(1000);
    expect(step.rows.some((r) => r.sampleParents?.some((p) => p >= 0))).toBe(true);
    const long = { step: "long" as const, steps: 1 };
    const [base] = await run(1, long);
    expectSame(await run(2, { ...long, contextParallel: 2 }), base!);
    expectSame(await run(4, { ...long, contextParallel: 4, checkpointing: true }), base!);
    expectSame(await run(4, { ...long, contextParallel: 2, shard: "full" }), base!);
  }, 300_000);
});

/** ||a - b|| / ||b|| over every tensor. */
function relL2(a: Record<string, number[]>, b: Record<string, number[]>): number {
  let diff = 0;
  let norm = 0;
  for (const [name, x] of Object.entries(b)) x.forEach((v, i) => ((diff += (a[name]![i]! - v) ** 2), (norm += v * v)));
  return Math.sqrt(diff / norm);
}

describe.skipIf(!gloo)("a 15.9k-token row in float32", () => {
  test("split over 2 ranks, its gradient is as far from float64's as the whole row's", async () => {
    // The split sums attention's terms in another order (blocks of queries, the log-sum-exp
    // saved) and the LM head's logprobs over the group: float32 rounding of the same size as
    // the whole row's, so both are measured against the float64 gradient from the same
    // (float32-rounded) weights, and the split may be at most a small factor further.
    const wide = { step: "wide" as const, steps: 1, checkpointing: true };
    const [row, ...more] = wideStep().rows;
    expect(more).toHaveLength(0);
    expect(row!.tokenIds.length).toBeGreaterThan(15000);
    expect(row!.sampleParents?.some((p) => p >= 0)).toBe(true);
    const [exact] = await run(1, { ...wide, roundWeights: true });
    const [whole] = await run(1, { ...wide, dtype: "f32" });
    const split = await run(2, { ...wide, dtype: "f32", contextParallel: 2 });
    const wholeError = relL2(whole!.grads!, exact!.grads!);
    const splitError = relL2(split[0]!.grads!, exact!.grads!);
    console.log(`relative L2 gradient error against float64: whole ${wholeError}, split ${splitError}`);
    expect(wholeError).toBeLessThan(1e-4);
    expect(splitError).toBeLessThan(3 * wholeError);
    expect(split[1]!.grads).toEqual(split[0]!.grads!); // the all-reduced gradient, on both ranks
  }, 300_000);
});

describe.skipIf(!gloo)("context-parallel errors", () => {
  test("a subgroup this rank is not in, or of unordered ranks, is refused by name", async () => {
    using group = await ProcessGroup.create({
      rank: 0,
      worldSize: 1,
      store: { type: "file", path: join(dir, "store-errors") },
    });
    expect(() => group.subgroup([1])).toThrow(/subgroup ranks must be distinct ranks of the parent \(0\.\.0\)/);
    using model = await tinyModel({ seed: 1, dtype: "f64" });
    using solo = group.subgroup([0]);
    solo.splitRows(model);
    const row = longStep().rows[0]!;
    // a group of one: the split is the whole row, and the step still runs
    const loss = { nRl: 100, nCe: 100, nRefKl: 100, nDistill: 100, losses: [LOSS] };
    expect(trainStep(model, row, loss, 2).all.loss).toBeFinite();
    solo.free();
    expect(() => trainStep(model, row, loss, 2)).toThrow(/invalid process group handle/);
  });
});

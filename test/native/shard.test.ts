// Sharded training (rlx.h "Sharded training", docs/scaling.md) against one replicated rank, in
// float64 on `tiny` with dist_batch.ts's mixed rl/ce/ref_kl/distill rows, two optimizer steps:
// the updated weights and the AdamW state (the ranks' slices put back together through the shard
// layout) equal the replicated run's within 1e-10 relative, for shard "none" with activation
// checkpointing on and off, "optimizer" and "full", on 1 rank (in this process) and on 2 and 4
// ranks (one process each, Gloo over a FileStore): the whole matrix, about 25 s.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distAvailable, ProcessGroup } from "../../src/native/dist.ts";
import { NativeGenerator, score } from "../../src/native/generate.ts";
import { trainStep } from "../../src/native/train.ts";
import type { ShardMode } from "../../src/native/model.ts";
import { distStep, LOSS, STEP_OPTIONS } from "./fixtures/dist_batch.ts";
import { f32, tinyModel } from "./tiny_model.ts";
import { runRanks, type ShardRankArgs, type ShardRankOutput } from "./fixtures/shard_rank.ts";
import { adamState, maxRel } from "./fixtures/shard_state.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-shard-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const gloo = await distAvailable("gloo");
let runs = 0;

async function run(
  worldSize: number,
  shard: ShardMode,
  checkpointing = false,
  more: Partial<ShardRankArgs> = {},
): Promise<ShardRankOutput[]> {
  const id = `${runs++}`;
  const store = { type: "file" as const, path: join(dir, `store-${id}`) };
  // LoRA dropout draws from the process's generator: a run of its own starts it where the others do
  const inProcess = more.loraDropout === undefined;
  const outs = await runRanks(dir, id, { worldSize, store, shard, checkpointing, ...more }, inProcess);
  if (typeof outs === "string") throw new Error(`a rank failed:\n${outs}`);
  return outs;
}

const MATRIX: [number, ShardMode, boolean][] = [1, 2, 4].flatMap((w) =>
  (["none", "optimizer", "full"] as const).flatMap((s) =>
    [false, true].map((c): [number, ShardMode, boolean] => [w, s, c]),
  ),
);

describe.skipIf(!gloo)("sharded training equals one replicated rank (float64)", async () => {
  let reference: ShardRankOutput[] | undefined;
  const replicated = async () => (reference ??= await run(1, "none"));
  for (const [world, shard, checkpointing] of MATRIX) {
    test(`${world} rank(s), shard "${shard}", activation checkpointing ${checkpointing ? "on" : "off"}`, async () => {
      const [base] = await replicated();
      const outs = await run(world, shard, checkpointing);
      const names = Object.keys(base!.params);
      for (const out of outs) {
        expect(maxRel(out.params, base!.params)).toBeLessThan(1e-10);
        expect(Math.abs(out.gradNorms[1]! / base!.gradNorms[1]! - 1)).toBeLessThan(1e-10);
      }
      const state = adamState(outs, names);
      expect(state.size).toBe(names.length);
      expect(maxRel(state, adamState([base!], names))).toBeLessThan(1e-10);
    }, 120_000);
  }
  test('2 ranks, shard "full" without gathering ahead (shard_prefetch 0): the same weights', async () => {
    const [base] = await replicated();
    for (const out of await run(2, "full", false, { prefetch: false }))
      expect(maxRel(out.params, base!.params)).toBeLessThan(1e-10);
  }, 120_000);
});

/**
 * Float32: how far a sharded rank's weights after one step are from one replicated rank's beyond
 * what rounding allows (<= 0: within). The sharded gradient sums the same terms in another order
 * (per unit, over the ranks), so it differs from the replicated one by rounding, at most 1e-5 of
 * each parameter's largest gradient entry (the bound test/native/dist.test.ts measures for the
 * all-reduce). AdamW's first step moves a weight by lr * g / (|g| + eps) (clipping scales g by
 * c <= 1), whose derivative is at most lr / (|g| + eps): a gradient near 0 turns a rounding-sized
 * |dg| into up to lr * |dg| / eps. So each weight may differ by lr * dg / (|g| + eps), plus the
 * float32 rounding of the update (2 ulps of lr) and of the stored weight (2 ulps).
 */
function adamBoundExcess(sharded: Record<string, number[]>, single: ShardRankOutput, lr: number): number {
  const eps = 1e-8;
  let worst = -Infinity;
  for (const [name, p] of Object.entries(single.params)) {
    const g = single.grads![name]!;
    const dg = 1e-5 * Math.max(...g.map(Math.abs));
    for (let i = 0; i < p.length; i++) {
      const rounding = 2 * Math.max(Math.abs(p[i]!), 1e-30) * 2 ** -23 + 2 * lr * 2 ** -23;
      const allowed = (lr * dg) / (Math.abs(g[i]!) + eps) + rounding;
      worst = Math.max(worst, Math.abs(sharded[name]![i]! - p[i]!) - allowed);
    }
  }
  return worst;
}

describe.skipIf(!gloo)("tied embeddings with q/k norms and biases; LoRA with dropout (float64)", () => {
  test('tied: 2 ranks "full" and "optimizer", 1 rank recomputed, equal one replicated rank', async () => {
    const [base] = await run(1, "none", false, { model: "tied" });
    for (const [world, shard, checkpointing] of [
      [2, "full", false],
      [2, "optimizer", false],
      [1, "none", true],
    ] as const) {
      const outs = await run(world, shard, checkpointing, { model: "tied" });
      for (const out of outs) expect(maxRel(out.params, base!.params)).toBeLessThan(1e-10);
      const names = Object.keys(base!.params);
      expect(maxRel(adamState(outs, names), adamState([base!], names))).toBeLessThan(1e-10);
    }
  }, 120_000);

  test("LoRA, dropout 0.1: recomputed layers draw the forward's masks; the sliced base stays put", async () => {
    // one rank recomputing against one rank keeping its graph: equal only if the recomputation
    // replays the dropout masks; then two ranks with the base sliced against two whole ones
    const lora = { loraDropout: 0.1 };
    const [whole] = await run(1, "none", false, lora);
    const [recomputed] = await run(1, "none", true, lora);
    expect(maxRel(recomputed!.loraParams!, whole!.loraParams!)).toBeLessThan(1e-10);
    const replicated = await run(2, "none", false, lora);
    const sliced = await run(2, "full", false, lora);
    for (const [i, out] of sliced.entries()) {
      expect(maxRel(out.loraParams!, replicated[i]!.loraParams!)).toBeLessThan(1e-10);
      expect(maxRel(out.params, replicated[i]!.params)).toBe(0); // the frozen base, gathered
    }
    expect(maxRel(replicated[0]!.loraParams!, whole!.loraParams!)).toBeGreaterThan(0); // dropout differs per rank
  }, 120_000);
});

describe.skipIf(!gloo)("sharded training in float32, one step", () => {
  for (const shard of ["optimizer", "full"] as const)
    test(`2 ranks, shard "${shard}": the weights within the rounding bound of one replicated rank's`, async () => {
      const [single] = await run(1, "none", false, { dtype: "f32", steps: 1 });
      const outs = await run(2, shard, false, { dtype: "f32", steps: 1 });
      for (const out of outs) expect(adamBoundExcess(out.params, single!, STEP_OPTIONS.lr)).toBeLessThanOrEqual(0);
      expect(outs[1]!.params).toEqual(outs[0]!.params); // every rank holds the same gathered weights
    }, 120_000);
});

describe.skipIf(!gloo)("a sharded model's errors", () => {
  test("what a sliced model cannot do is refused by name; the step must name its group", async () => {
    using group = await ProcessGroup.create({
      rank: 0,
      worldSize: 1,
      store: { type: "file", path: join(dir, "errors-store") },
    });
    using model = await tinyModel({ seed: 3 });
    group.shard(model, "full");
    expect(() => group.shard(model, "full")).toThrow("the model is sharded already");
    expect(() => NativeGenerator.create(model, { slots: 1, capacity: 8 })).toThrow(
      'rlx_gen_create: the model is sharded "full" and holds only its slices',
    );
    expect(() => score(model, [[1, 2, 3]])).toThrow('rlx_score: the model is sharded "full"');
    const name = "model.norm.weight";
    expect(() => model.setParam(name, new Float32Array(32), "f32", [32])).toThrow("rlx_model_set_param");
    expect(() => group.allreduceGrads(model)).toThrow("its gradients reach the slices by reduce-scatter");
    // a gathered parameter is the whole one: the norm starts at ones
    expect([...f32(model.getParam(name))]).toEqual(Array(32).fill(1));
    const row = distStep().rows[0]!;
    model.shardGroup = null; // a batch that does not name the group
    expect(() => trainStep(model, row, { ...LOSS, nRl: 1, nCe: 1, nRefKl: 1 }, 2)).toThrow(
      "rlx_batch.shard_group must be the group the model was sharded over",
    );
  });
});

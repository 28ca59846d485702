// The shim on a GPU (skipped where no CUDA device is visible: a CPU libtorch, or a CUDA build on a
// machine without a GPU). scripts/gpu_check.sh runs it on a GPU node. Against the same model on
// the CPU or the same run on the GPU:
//   - a packed training step (all three loss components, five rl loss types) gives the CPU's loss and gradients
//     (float32; the GPU's kernels sum in another order, hence 1e-4 of each parameter's scale);
//   - generation logprobs equal scoring logprobs (mismatch_kl) in float32, and in bf16 weights with
//     the LM head in float32 within what bf16 activations allow;
//   - the fused SDPA path agrees with the hand-written attention;
//   - a shared-prefix row (SDPA with an explicit mask) gives the whole samples' loss and gradients,
//     and a tool episode's next turn from kept K/V gives a full prefill's tokens and logprobs;
//   - the caching allocator's peak is reported, and NCCL runs a one-rank all-reduce;
//   - a step sharded "full" over a one-rank NCCL group (_allgather_base, _reduce_scatter_base)
//     updates the weights as the whole model on the CPU does.
import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distAvailable, ProcessGroup } from "../../src/native/dist.ts";
import { generate, NativeGenerator, score } from "../../src/native/generate.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { deviceMemory, runtimeInfo } from "../../src/native/runtime.ts";
import { NativeOptimizer, trainStep } from "../../src/native/train.ts";
import { stepCounts } from "../../src/data/pack.ts";
import { distStep } from "./fixtures/dist_batch.ts";
import { group, shareRow } from "./fixtures/shared_rows.ts";
import { maxRelDiff, pack, readGrads, readParams, rng, TINY_FULL, tinyModel } from "./tiny_model.ts";

const cuda = (await runtimeInfo()).cuda;
const PROMPTS = [
  [1, 5, 9, 2],
  [7, 3],
  [4, 4, 8, 1, 6],
];

/** Mean of ratio - log ratio - 1 between generation and scoring logprobs (docs/architecture.md §6). */
function mismatchKl(model: NativeModel, temperature: number): number {
  const out = generate(
    model,
    PROMPTS,
    PROMPTS.map((_, i) => ({ temperature, maxNewTokens: 16, seed: 7 + i })),
  );
  const scored = score(
    model,
    PROMPTS.map((p, i) => [...p, ...out[i]!.tokens]),
    { temperature: temperature || 1 },
  ).logprobs;
  let kl = 0;
  let n = 0;
  out.forEach((c, i) =>
    c.logprobs.forEach((glp, j) => {
      const d = scored[i]![PROMPTS[i]!.length + j]! - glp;
      kl += Math.exp(d) - d - 1;
      n += 1;
    }),
  );
  return kl / n;
}

describe.skipIf(!cuda)("on a CUDA device", () => {
  test("a packed training step gives the CPU's loss and gradients", async () => {
    const step = distStep(true); // five rl loss types, the clipping ones among them
    const counts = stepCounts(step.rows);
    const loss = {
      nRl: counts.rl,
      nCe: counts.ce,
      nRefKl: counts.refKl,
      nRlSequences: counts.rlSequences,
      losses: step.losses,
    };
    const results = [];
    for (const device of ["cpu", "cuda"]) {
      using model = await tinyModel({ seed: 3, config: TINY_FULL, device });
      let total = 0;
      for (const row of step.rows) total += trainStep(model, row, loss).all.loss;
      results.push({ total, grads: readGrads(model) });
    }
    const [cpu, gpu] = results;
    expect(gpu!.total).toBeCloseTo(cpu!.total, 4);
    for (const [name, g] of cpu!.grads) {
      const scale = Math.max(1e-3, ...Array.from(g, Math.abs));
      const worst = Math.max(...Array.from(g, (x, i) => Math.abs(x - gpu!.grads.get(name)![i]!)));
      expect(worst / scale).toBeLessThan(1e-4);
    }
    const memory = await deviceMemory("cuda", true);
    expect(memory.peak).toBeGreaterThan(0);
  });

  test("generation logprobs equal scoring logprobs: float32, and bf16 weights with a float32 LM head", async () => {
    using f32 = await tinyModel({ config: TINY_FULL, sharpen: 5, device: "cuda" });
    expect(mismatchKl(f32, 1)).toBeLessThan(1e-6);
    expect(mismatchKl(f32, 0)).toBeLessThan(1e-6);
    using bf16 = await tinyModel({ config: TINY_FULL, sharpen: 5, device: "cuda", dtype: "bf16" });
    expect(mismatchKl(bf16, 1)).toBeLessThan(1e-3);
  });

  test("the fused attention kernel agrees with the hand-written attention", async () => {
    using model = await tinyModel({ config: TINY_FULL, sharpen: 5, device: "cuda" });
    const seqs = PROMPTS.map((p) => [...p, ...p, ...p]);
    const fused = score(model, seqs).logprobs;
    model.setOption("fused_attention", false);
    const manual = score(model, seqs).logprobs;
    fused.forEach((lp, i) => lp.forEach((x, t) => expect(Math.abs(x - manual[i]![t]!)).toBeLessThan(1e-4)));
  });

  test("a shared-prefix row gives the whole samples' loss and gradients (fused attention with a mask)", async () => {
    const rand = rng(17);
    const groups = [{ prompt: 12, samples: group(rand, 12, [5, 5, 7]) }];
    const loss = { nRl: 20, nCe: 6, nRefKl: 15 };
    using model = await tinyModel({ config: TINY_FULL, sharpen: 3, device: "cuda" });
    const whole = trainStep(model, pack(groups[0]!.samples), loss).all.loss;
    const wholeGrads = readGrads(model);
    model.zeroGrad();
    const shared = trainStep(model, shareRow(groups, []), loss).all.loss;
    expect(Math.abs(shared - whole)).toBeLessThan(1e-4 * Math.max(1, Math.abs(whole)));
    expect(maxRelDiff(readGrads(model), wholeGrads)).toBeLessThan(1e-4);
  });

  test("a next turn from kept K/V gives a full prefill's tokens and logprobs", async () => {
    using model = await tinyModel({ config: TINY_FULL, sharpen: 4, device: "cuda" });
    const first = Array.from({ length: 40 }, (_, i) => (i * 7) % 64);
    const turn = (gen: NativeGenerator, prompt: number[]) => {
      const out = [gen.add([{ prompt, sampling: { temperature: 0, maxNewTokens: 8 } }])[0]!];
      while (!out[out.length - 1]!.finish) out.push(gen.step()[0]!);
      return out;
    };
    using kept = NativeGenerator.create(model, { slots: 2, capacity: 128 });
    const reply = turn(kept, first).map((t) => t.token);
    const next = [...first, ...reply, 3, 1, 4, 1, 5];
    const a = turn(kept, next);
    expect(kept.cacheStats().reusedTokens).toBe(40 + 8 - 1);
    using fresh = NativeGenerator.create(model, { slots: 2, capacity: 128 });
    const b = turn(fresh, next);
    expect(a.map((t) => t.token)).toEqual(b.map((t) => t.token));
    a.forEach((t, j) => expect(Math.abs(t.logprob - b[j]!.logprob)).toBeLessThan(1e-4));
  });

  test.skipIf(!cuda)("NCCL runs a one-rank all-reduce", async () => {
    expect(await distAvailable("nccl")).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), "rlx-nccl-"));
    using group = await ProcessGroup.create({
      rank: 0,
      worldSize: 1,
      store: { type: "file", path: join(dir, "store") },
      backend: "nccl",
    });
    const values = Float32Array.of(1, 2, 3);
    group.allreduce(values, "sum");
    expect([...values]).toEqual([1, 2, 3]);
  });

  test.skipIf(!cuda)('a step sharded "full" over a one-rank NCCL group gives the CPU\'s updated weights', async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-nccl-shard-"));
    const store = { type: "file" as const, path: join(dir, "store") };
    using group = await ProcessGroup.create({ rank: 0, worldSize: 1, store, backend: "nccl" });
    const updated = async (device: string, shard: boolean) => {
      using model = await tinyModel({ seed: 3, device, config: TINY_FULL });
      if (shard) group.shard(model, "full");
      using optimizer = NativeOptimizer.create(model);
      for (const row of distStep().rows) trainStep(model, row, { nRl: 50, nCe: 20, nRefKl: 20, nDistill: 20 });
      optimizer.step(1e-3, 1.0);
      return readParams(model);
    };
    const [cpu, gpu] = [await updated("cpu", false), await updated("cuda", true)];
    expect(maxRelDiff(gpu, cpu)).toBeLessThan(1e-4);
  });
});

// The distill component through the model's train step (docs/architecture.md §6) on a tiny
// float64 transformer: every parameter's gradient against central differences (forward, reverse
// and JSD tokens, empty slots, beside ce), k = vocabulary equal to the exact KL of the student's
// full distribution within 1e-6, a step without distill streams bit-identical to a raw call without them,
// and the step's gradient the same whether packStep puts the samples in one row or one per row
// (packed vs unpacked; balance.ts's rank split through sliceRow too). Two Gloo ranks are in
// dist.test.ts (its batch has distill samples).
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { TrainingSample } from "../../src/data/types.ts";
import { native } from "../../src/native/ffi.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { scoreTop } from "../../src/native/score_top.ts";
import { type PackedRow, packStep } from "../../src/data/pack.ts";
import { batchStruct, type LossSettings, lossStruct, METRIC_FIELDS, trainStep } from "../../src/native/train.ts";
import { splitRow } from "../../src/trainer/balance.ts";
import { denominatorsOf } from "../../src/trainer/step.ts";
import { f64, maxRelDiff, readGrads, rng, TINY, TINY_FULL, tinyModel } from "./tiny_model.ts";
import { rlLoss } from "../../src/data/loss_types.ts";

setDefaultTimeout(120_000);
const V = TINY.vocab_size;

/** A training sample whose action tokens are distill members with k teacher slots (some empty). */
function distillSample(rand: () => number, id: number, length: number, k: number, betas: number[]): TrainingSample {
  const tokenIds = Array.from({ length }, () => Math.floor(rand() * V));
  const lossMask = tokenIds.map((_, i) => (i >= 2 ? 1 : 0));
  const ids: number[] = [];
  const logprobs: number[] = [];
  lossMask.forEach((m, t) => {
    const picked = new Set<number>();
    while (picked.size < k) picked.add(Math.floor(rand() * V));
    const mass = 0.3 + 0.6 * rand();
    const raw = [...picked].map(() => 0.2 + rand());
    const sum = raw.reduce((a, b) => a + b, 0);
    [...picked].forEach((pid, j) => {
      const empty = !m || (t % 4 === 3 && j === k - 1);
      ids.push(empty ? -1 : pid);
      logprobs.push(empty ? 0 : Math.log((mass * raw[j]!) / sum));
    });
  });
  return {
    tokenIds,
    lossMask,
    advantages: lossMask.map(() => 0),
    inferenceLogprobs: lossMask.map((m) => (m ? -3 - rand() : 0)),
    temperatures: lossMask.map((m) => (m ? 0.7 : 1)),
    rlWeights: lossMask.map(() => 0),
    distillWeights: lossMask.map((m) => (m ? 0.5 + rand() : 0)),
    distillBetas: lossMask.map((_, t) => betas[t % betas.length]!),
    distillTargets: { k, ids, logprobs },
    env: "math",
    rolloutId: `d${id}`,
  };
}

function ceSample(rand: () => number, id: number, length: number): TrainingSample {
  const tokenIds = Array.from({ length }, () => Math.floor(rand() * V));
  return {
    tokenIds,
    lossMask: tokenIds.map(() => 0),
    advantages: tokenIds.map(() => 0),
    inferenceLogprobs: tokenIds.map(() => 0),
    temperatures: tokenIds.map(() => 1),
    ceWeights: tokenIds.map((_, t) => (t % 2 ? 1 : 0)),
    env: "forth",
    rolloutId: `c${id}`,
  };
}

/** The native step on a packStep row (its env indices need the env count). */
function train(model: NativeModel, row: PackedRow, settings: LossSettings) {
  return trainStep(model, row, settings, Math.max(0, ...(row.envIndex ?? [])) + 1);
}

function settingsOf(rows: readonly PackedRow[]): LossSettings {
  const n = denominatorsOf(rows);
  return { nRl: n.rl, nCe: n.ce, nRefKl: n.refKl, nDistill: n.distill, nRlSequences: n.rlSequences };
}

function stepGrads(model: NativeModel, rows: readonly PackedRow[], settings: LossSettings) {
  model.zeroGrad();
  let loss = 0;
  for (const row of rows) loss += train(model, row, settings).all.loss;
  const grads = readGrads(model);
  model.zeroGrad();
  return { loss, grads };
}

describe("the distill component through the model (float64)", () => {
  const rand = rng(41);
  const samples = [
    distillSample(rand, 0, 9, 4, [0, 1, 0.3]),
    ceSample(rand, 1, 7),
    distillSample(rand, 2, 6, 2, [0.7]),
    distillSample(rand, 3, 11, 5, [1, 0]),
  ];

  test("gradients of every parameter against central differences", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 4, seed: 6 });
    const step = packStep(samples, { seqLen: 64 });
    expect(step.rows).toHaveLength(1);
    const row = step.rows[0]!;
    expect(row.distillK).toBe(5);
    const settings = settingsOf(step.rows);
    const m = train(model, row, settings).all;
    expect(m.distillCount).toBe(7 + 4 + 9);
    expect(m.distillSum).toBeGreaterThan(0.05);
    const grads = readGrads(model);
    model.zeroGrad();
    const r = rng(5);
    const h = 1e-5;
    for (const p of model.params()) {
      const values = f64(model.getParam(p.name, "f64"));
      const g = grads.get(p.name)!;
      for (let i = 0; i < 2; i++) {
        const at = Math.floor(r() * values.length);
        const x = values[at]!;
        const lossAt = (v: number) => {
          values[at] = v;
          model.setParam(p.name, values, "f64", p.shape);
          const l = train(model, row, settings).all.loss;
          model.zeroGrad();
          return l;
        };
        const fd = (lossAt(x + h) - lossAt(x - h)) / (2 * h);
        lossAt(x);
        expect(Math.abs(fd - g[at]!)).toBeLessThan(1e-8 + 1e-6 * Math.abs(fd));
      }
    }
  });

  test("k = vocabulary equals the exact divergence of the student's full distribution within 1e-6", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 4, seed: 7 });
    const r = rng(8);
    const tokenIds = Array.from({ length: 6 }, () => Math.floor(r() * V));
    // The student's own temperature-1 distribution at each position (its top-V: every id).
    const student = scoreTop(model, [tokenIds], { k: V })[0]!.top;
    for (const beta of [0, 1, 0.5]) {
      const teacher = tokenIds.map(() => {
        const z = Array.from({ length: V }, () => 3 * (r() - 0.5));
        const lse = Math.log(z.reduce((s, x) => s + Math.exp(x), 0));
        return z.map((x) => Math.fround(x - lse));
      });
      const ids = teacher.flatMap((lp) => lp.map((_, i) => i).sort((a, b) => lp[b]! - lp[a]!));
      const sample: TrainingSample = {
        ...distillSample(r, 9, 6, 1, [beta]),
        tokenIds,
        distillWeights: [0, 1, 1, 1, 1, 1],
        distillTargets: { k: V, ids, logprobs: ids.map((id, j) => teacher[Math.floor(j / V)]![id]!) },
      };
      const step = packStep([sample], { seqLen: 64 });
      const m = train(model, step.rows[0]!, settingsOf(step.rows)).all;
      model.zeroGrad();
      let exact = 0;
      for (let t = 1; t < 6; t++) {
        const s = new Array<number>(V);
        student[t]!.ids.forEach((id, j) => (s[id] = student[t]!.logprobs[j]!));
        const tp = teacher[t]!;
        const kl = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + Math.exp(x) * (x - b[i]!), 0);
        const mix = tp.map((x, i) => Math.log(beta * Math.exp(x) + (1 - beta) * Math.exp(s[i]!)));
        exact += beta === 0 ? kl(tp, s) : beta === 1 ? kl(s, tp) : beta * kl(tp, mix) + (1 - beta) * kl(s, mix);
      }
      expect(exact / 5).toBeGreaterThan(0.05);
      expect(Math.abs(m.distillSum / 5 - exact / 5)).toBeLessThan(1e-6);
    }
  });

  test("without distill streams the step is bit-identical to a raw call with N_distill 0 (loss, metrics, gradients)", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL, sharpen: 4, seed: 9 });
    const r = rng(10);
    const plain = [ceSample(r, 0, 9), { ...ceSample(r, 1, 7), lossMask: [0, 0, 1, 1, 1, 1, 1] }].map((s) => ({
      ...s,
      advantages: s.tokenIds.map(() => r() - 0.5),
      inferenceLogprobs: s.tokenIds.map(() => -4 + r()),
    }));
    const row = packStep(plain, { seqLen: 64 }).rows[0]!;
    const settings = { ...settingsOf([row]), losses: [rlLoss({ kl_tau: 0.01 })] };
    const v5 = stepGrads(model, [row], settings);
    const metrics5 = train(model, row, settings).all;
    model.zeroGrad();
    const loss = { nRl: settings.nRl, nCe: settings.nCe, nRefKl: 1, losses: settings.losses, nDistill: 0 };
    const metrics4 = new Float64Array(METRIC_FIELDS.length);
    const lib = native();
    const T = row.tokenIds.length;
    const plainRow = { tokenIds: row.tokenIds, sampleLengths: row.sampleLengths, lossMask: row.lossMask, advantages: row.advantages, inferenceLogprobs: row.inferenceLogprobs, temperatures: row.temperatures, rlWeights: row.rlWeights, ceWeights: row.ceWeights }; // prettier-ignore
    const rc = lib.rlx_train_step(
      model.handle,
      batchStruct(plainRow, T, 0),
      lossStruct(loss),
      metrics4,
      metrics4.length,
    );
    expect(rc).toBe(0);
    const grads4 = readGrads(model);
    model.zeroGrad();
    expect(maxRelDiff(grads4, v5.grads)).toBe(0);
    expect(Array.from(metrics4).slice(0, 17)).toEqual(METRIC_FIELDS.slice(0, 17).map((f) => metrics5[f]));
    expect(metrics5.distillSum).toBe(0);
    expect(metrics5.distillCount).toBe(0);
  });

  test("the gradient does not depend on packing: one row, one row per sample, a rank split", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 4, seed: 11 });
    const one = packStep(samples, { seqLen: 64 });
    const settings = settingsOf(one.rows);
    const whole = stepGrads(model, one.rows, settings);
    const perSample = packStep(samples, { seqLen: 11 });
    expect(perSample.rows).toHaveLength(4);
    // Rows of another k: each row is as wide as its own samples' largest k.
    expect(perSample.rows.map((row) => row.distillK ?? 0).sort()).toEqual([0, 2, 4, 5]);
    const unpacked = stepGrads(model, perSample.rows, settings);
    expect(maxRelDiff(unpacked.grads, whole.grads)).toBeLessThan(1e-12);
    expect(Math.abs(unpacked.loss - whole.loss)).toBeLessThan(1e-13);
    // balance.ts's split of the one row (what two ranks would train), rows re-sliced with their slots.
    const halves = splitRow(one.rows[0]!, { a: 1, b: 0 });
    expect(halves.every((h) => h.distillK === 5)).toBe(true);
    const split = stepGrads(model, halves, settings);
    expect(maxRelDiff(split.grads, whole.grads)).toBeLessThan(1e-12);
    expect(Math.max(...[...whole.grads.values()].map((g) => Math.max(...g.map(Math.abs))))).toBeGreaterThan(1e-4);
  });
});

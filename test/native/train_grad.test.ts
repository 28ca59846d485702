// The train step's gradients: against central finite differences in float64 for every parameter
// (each loss component, with and without weights, overlapping), the all-empty micro-batch, packed
// against unpacked, micro-batch invariance under global denominators, LM-head chunking, autocast.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { NativeModel } from "../../src/native/model.ts";
import { score } from "../../src/native/generate.ts";
import type { TrainRow } from "../../src/data/train_row.ts";
import { trainStep, type LossSettings } from "../../src/native/train.ts";
import {
  f64,
  maxRelDiff,
  pack,
  randomSample,
  readGrads,
  rng,
  type Sample,
  TINY_FULL,
  tinyModel,
} from "./tiny_model.ts";
import { rlLoss } from "../../src/data/loss_types.ts";

// Each test is well under a second on an idle machine; a busy shared one can be 10-100x slower
// (bunfig.toml has no per-test timeout key: the default is 5 s).
setDefaultTimeout(60_000);

/**
 * Sets inference (and reference) logprobs from the model's own logprobs so that each action token
 * lands clearly inside one branch of the trust-region mask: |dp| < 0.05 (kept) or dp < -0.4 with
 * A <= 0 (masked). Finite differences then never cross a mask boundary.
 */
function anchorLogprobs(model: NativeModel, samples: Sample[], rand: () => number): void {
  const lps = score(
    model,
    samples.map((s) => s.tokenIds),
    { temperature: samples.map((s) => new Float32Array(s.tokenIds.length).fill(s.temperature)) },
  ).logprobs;
  samples.forEach((s, i) => {
    const lp = lps[i]!;
    s.inferenceLogprobs = s.tokenIds.map((_, t) => {
      const p = Math.exp(lp[t]!);
      if (t % 3 === 2) {
        s.advantages[t] = -Math.abs(s.advantages[t]!);
        return Math.log(Math.min(0.999, p + 0.5));
      }
      return Math.log(Math.max(1e-6, Math.min(0.999, p * (1 + 0.3 * (rand() - 0.5)))));
    });
    if (s.refKlWeights) s.refLogprobs = s.tokenIds.map((_, t) => lp[t]! + (rand() - 0.5));
  });
}

function lossOf(model: NativeModel, row: TrainRow, settings: LossSettings): number {
  const loss = trainStep(model, row, settings).all.loss;
  model.zeroGrad();
  return loss;
}

/**
 * Checks every parameter's gradient at two random coordinates against central differences of the
 * loss value. `surrogate` is subtracted from the loss value first: ref_kl's advantage is
 * stopgrad(ref_lp - lp), so its gradient is that of the loss with the advantage held fixed, which
 * differs from the loss value's derivative by exactly d/dθ sum(w * keep * ratio) / N_ref_kl.
 */
function finiteDifferenceCheck(
  model: NativeModel,
  row: TrainRow,
  settings: LossSettings,
  seed: number,
  surrogate?: { row: TrainRow; settings: LossSettings },
): number {
  model.zeroGrad();
  trainStep(model, row, settings);
  const grads = readGrads(model);
  model.zeroGrad();
  const rand = rng(seed);
  const h = 1e-5;
  let largest = 0;
  for (const p of model.params()) {
    const values = f64(model.getParam(p.name, "f64"));
    const g = grads.get(p.name)!;
    for (let k = 0; k < 2; k++) {
      const i = Math.floor(rand() * values.length);
      const original = values[i]!;
      values[i] = original + h;
      model.setParam(p.name, values, "f64", p.shape);
      const value = () =>
        lossOf(model, row, settings) - (surrogate ? lossOf(model, surrogate.row, surrogate.settings) : 0);
      const up = value();
      values[i] = original - h;
      model.setParam(p.name, values, "f64", p.shape);
      const down = value();
      values[i] = original;
      model.setParam(p.name, values, "f64", p.shape);
      const fd = (up - down) / (2 * h);
      expect(Math.abs(fd - g[i]!)).toBeLessThan(1e-8 + 1e-6 * Math.abs(fd));
      largest = Math.max(largest, Math.abs(g[i]!));
    }
  }
  return largest;
}

describe("gradients against central finite differences (float64)", () => {
  test("rl only, no weight streams, two samples at different temperatures", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 8, seed: 2 });
    const rand = rng(1);
    const samples = [
      { ...randomSample(rand, 9, 3), temperature: 1 },
      { ...randomSample(rand, 7, 2), temperature: 0.7 },
    ];
    anchorLogprobs(model, samples, rand);
    const row = pack(samples);
    const m = trainStep(model, row, { nRl: 11, nCe: 1, nRefKl: 1 });
    expect(m.all.rlCount).toBe(11);
    expect(m.all.maskedLow).toBeGreaterThan(0);
    expect(m.all.maskedLow).toBeLessThan(11);
    model.zeroGrad();
    expect(finiteDifferenceCheck(model, row, { nRl: 11, nCe: 1, nRefKl: 1 }, 5)).toBeGreaterThan(1e-3);
  });

  test("rl, ce and ref_kl with weights, overlapping on shared tokens, tied embeddings", async () => {
    using model = await tinyModel({
      dtype: "f64",
      config: { ...TINY_FULL, tie_word_embeddings: true },
      sharpen: 8,
      seed: 4,
    });
    const rand = rng(2);
    const rlSample: Sample = { ...randomSample(rand, 10, 3), temperature: 1.2 };
    rlSample.rlWeights = rlSample.tokenIds.map((_, t) => (t === 5 ? 0 : 0.5 + rand()));
    rlSample.ceWeights = rlSample.tokenIds.map((_, t) => (t % 2 === 0 ? 0.1 : 0)); // echo-like: prompt tokens too
    const refSample: Sample = { ...randomSample(rand, 8, 2), temperature: 1 };
    refSample.rlWeights = refSample.tokenIds.map(() => 0);
    refSample.refKlWeights = refSample.tokenIds.map((_, t) => (t >= 2 ? 1 + rand() : 0));
    refSample.ceWeights = refSample.tokenIds.map((_, t) => (t === 6 ? 0.3 : 0)); // overlaps ref_kl
    const ceSample: Sample = { ...randomSample(rand, 6, 6), temperature: 1 };
    ceSample.ceWeights = ceSample.tokenIds.map(() => 1);
    const samples = [rlSample, refSample, ceSample];
    anchorLogprobs(model, samples, rand);
    const row = pack(samples);
    const settings = { nRl: 6, nCe: 9, nRefKl: 7, losses: [rlLoss({ dppo_mask_low: 0.3, kl_tau: 0.01 })] };
    const m = trainStep(model, row, settings);
    expect(m.all.rlCount).toBe(6);
    expect(m.all.refKlCount).toBe(6);
    expect(m.all.ceCount).toBe(4 + 1 + 5); // t = 0 of each sample is never a member
    expect(m.all.refKlMasked).toBeGreaterThan(0);
    expect(m.all.refKlMasked).toBeLessThan(6);
    model.zeroGrad();
    // sum(w * keep * ratio) / N over the ref_kl tokens is the rl loss with A = -1 on them, no KL
    // term, and a low mask of 0.2 (ref_kl's fixed one-sided mask): the stop-gradient correction.
    const zeros = (s: Sample) => s.tokenIds.map(() => 0);
    const correction = pack(
      samples.map((s) => ({
        ...s,
        lossMask: (s.refKlWeights ?? zeros(s)).map((w) => (w ? 1 : 0)),
        advantages: s.tokenIds.map(() => -1),
        rlWeights: s.refKlWeights ?? zeros(s),
        ceWeights: zeros(s),
        refKlWeights: zeros(s),
      })),
    );
    const surrogate = {
      row: correction,
      settings: { nRl: 7, nCe: 1, nRefKl: 1, losses: [rlLoss({ dppo_mask_low: 0.2, kl_tau: 0 })] },
    };
    expect(finiteDifferenceCheck(model, row, settings, 6, surrogate)).toBeGreaterThan(1e-3);
  });
});

test("an all-empty micro-batch: loss 0, zero gradient, and nothing added to accumulated gradients", async () => {
  using model = await tinyModel({ dtype: "f64" });
  const rand = rng(3);
  const empty = pack([
    {
      ...randomSample(rand, 8, 8),
      temperature: 1,
      ceWeights: new Array(8).fill(0),
      refKlWeights: new Array(8).fill(0),
      refLogprobs: new Array(8).fill(0),
    },
  ]);
  const m = trainStep(model, empty, { nRl: 1, nCe: 1, nRefKl: 1 });
  expect(m.all.loss).toBe(0);
  expect([...readGrads(model).values()].every((g) => g.every((x) => x === 0))).toBe(true);
  trainStep(model, pack([{ ...randomSample(rand, 8, 2), temperature: 1 }]), { nRl: 6, nCe: 1, nRefKl: 1 });
  const before = readGrads(model);
  trainStep(model, empty, { nRl: 1, nCe: 1, nRefKl: 1 });
  expect(maxRelDiff(readGrads(model), before)).toBe(0);
});

test("one-token samples (nothing to predict) train as empty, alone or packed with others", async () => {
  using model = await tinyModel({ dtype: "f64" });
  const single = {
    tokenIds: [5],
    lossMask: [1],
    advantages: [1],
    inferenceLogprobs: [-1],
    temperature: 1,
    ceWeights: [1],
  };
  expect(trainStep(model, pack([single]), { nRl: 1, nCe: 1, nRefKl: 1 }).all).toMatchObject({
    loss: 0,
    rlCount: 0,
    ceCount: 0,
    tokens: 1,
  });
  const other = { ...randomSample(rng(8), 6, 2), temperature: 1 };
  const withSingle = trainStep(model, pack([single, other, single]), { nRl: 4, nCe: 1, nRefKl: 1 }).all;
  const grads = readGrads(model);
  model.zeroGrad();
  const alone = trainStep(model, pack([other]), { nRl: 4, nCe: 1, nRefKl: 1 }).all;
  expect(withSingle.loss).toBeCloseTo(alone.loss, 14);
  expect(maxRelDiff(readGrads(model), grads)).toBeLessThan(1e-13);
});

describe("packing and micro-batching do not change the numbers", () => {
  const rand = rng(9);
  const samples: Sample[] = [12, 5, 9, 9, 3, 7].map((n, i) => {
    const s = { ...randomSample(rand, n, 2), temperature: [1, 0.6, 1, 1, 1.5, 1][i]! };
    s.inferenceLogprobs = s.tokenIds.map(() => -4 + rand());
    return s;
  });
  const members = samples.reduce((n, s) => n + s.lossMask.filter((x) => x).length, 0);
  const settings = { nRl: members, nCe: 1, nRefKl: 1 };

  function gradsOf(model: NativeModel, rows: Sample[][]): Map<string, Float64Array> {
    model.zeroGrad();
    for (const r of rows) trainStep(model, pack(r), settings);
    const grads = readGrads(model);
    model.zeroGrad();
    return grads;
  }

  for (const [dtype, tol] of [
    ["f64", 1e-12],
    ["f32", 2e-5],
  ] as const) {
    // Scores come out as float32, so the logprob tolerance is float32's for both model dtypes.
    test(`packed logprobs equal unpacked ones (${dtype} model, tolerance 1e-5)`, async () => {
      using model = await tinyModel({ dtype, config: TINY_FULL, sharpen: 5 });
      const seqs = samples.map((s) => s.tokenIds);
      const packed = score(model, seqs, { rowTokens: 0 }).logprobs;
      seqs.forEach((seq, i) => {
        const alone = score(model, [seq]).logprobs[0]!;
        for (let t = 0; t < seq.length; t++) expect(Math.abs(packed[i]![t]! - alone[t]!)).toBeLessThan(1e-5);
      });
    });

    test(`one step's gradient is the same in one row, two micro-batches or one per sample (${dtype}, tolerance ${tol})`, async () => {
      using model = await tinyModel({ dtype, config: TINY_FULL, sharpen: 5 });
      const one = gradsOf(model, [samples]);
      expect(maxRelDiff(gradsOf(model, [samples.slice(0, 3), samples.slice(3)]), one)).toBeLessThan(tol);
      expect(
        maxRelDiff(
          gradsOf(
            model,
            samples.map((s) => [s]),
          ),
          one,
        ),
      ).toBeLessThan(tol);
      expect(Math.max(...[...one.values()].map((g) => Math.max(...g.map(Math.abs))))).toBeGreaterThan(1e-4);
    });
  }

  test("LM-head chunking (3 tokens per chunk) gives the same loss and gradients", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 5 });
    const row = pack(samples);
    const loss = trainStep(model, row, settings).all;
    const grads = readGrads(model);
    model.zeroGrad();
    model.setOption("logits_chunk", 3);
    const chunked = trainStep(model, row, settings).all;
    expect(chunked.loss).toBeCloseTo(loss.loss, 13);
    expect(chunked.entropySum).toBeCloseTo(loss.entropySum, 12);
    expect(maxRelDiff(readGrads(model), grads)).toBeLessThan(1e-13);
  });
});

test("bf16 autocast: the step runs, its loss is close to float32's and its gradient points the same way", async () => {
  using model = await tinyModel({ dtype: "f32", config: TINY_FULL, sharpen: 5 });
  const rand = rng(4);
  const row = pack([12, 20, 9].map((n) => ({ ...randomSample(rand, n, 3), temperature: 1 })));
  const settings = { nRl: 32, nCe: 1, nRefKl: 1 };
  const exact = trainStep(model, row, settings).all;
  const g32 = readGrads(model);
  model.zeroGrad();
  model.setOption("autocast_bf16", true);
  const low = trainStep(model, row, settings).all;
  const g16 = readGrads(model);
  expect(Math.abs(low.loss - exact.loss)).toBeLessThan(0.02 * Math.abs(exact.loss) + 1e-3);
  let dot = 0,
    n32 = 0,
    n16 = 0;
  for (const [name, a] of g32) {
    const b = g16.get(name)!;
    for (let i = 0; i < a.length; i++) ((dot += a[i]! * b[i]!), (n32 += a[i]! ** 2), (n16 += b[i]! ** 2));
  }
  expect(dot / Math.sqrt(n32 * n16)).toBeGreaterThan(0.99);
  expect(maxRelDiff(g16, g32)).toBeGreaterThan(0); // it really ran in lower precision
});

// AdamW against a float64 reference written from torch.optim.AdamW's update rule and
// clip_grad_norm_, the skip on a non-finite loss, and the state image round trip.
import { expect, setDefaultTimeout, test } from "bun:test";
import { NativeModel } from "../../src/native/model.ts";
import { NativeOptimizer, trainStep } from "../../src/native/train.ts";
import {
  maxRelDiff,
  pack,
  randomSample,
  readGrads,
  readParams,
  rng,
  TINY,
  TINY_FULL,
  tinyModel,
} from "./tiny_model.ts";

// Each test is well under a second on an idle machine; a busy shared one can be 10-100x slower
// (bunfig.toml has no per-test timeout key: the default is 5 s).
setDefaultTimeout(60_000);

const rand = rng(21);
const rows = [0, 1, 2, 3].map(() =>
  pack([
    { ...randomSample(rand, 10, 3), temperature: 1 },
    { ...randomSample(rand, 6, 2), temperature: 0.8 },
  ]),
);
const SETTINGS = { nRl: 11, nCe: 1, nRefKl: 1 };

interface Adam {
  m: Map<string, Float64Array>;
  v: Map<string, Float64Array>;
  step: number;
}

function referenceStep(
  params: Map<string, Float64Array>,
  grads: Map<string, Float64Array>,
  s: Adam,
  o: { lr: number; b1: number; b2: number; eps: number; wd: number; maxNorm: number },
): number {
  let sq = 0;
  for (const g of grads.values()) for (const x of g) sq += x * x;
  const norm = Math.sqrt(sq);
  const clip = o.maxNorm > 0 ? Math.min(1, o.maxNorm / (norm + 1e-6)) : 1;
  s.step += 1;
  const bias1 = 1 - o.b1 ** s.step;
  const bias2 = 1 - o.b2 ** s.step;
  for (const [name, p] of params) {
    const g = grads.get(name)!;
    const m = s.m.get(name) ?? new Float64Array(p.length);
    const v = s.v.get(name) ?? new Float64Array(p.length);
    for (let i = 0; i < p.length; i++) {
      const gi = g[i]! * clip;
      m[i] = o.b1 * m[i]! + (1 - o.b1) * gi;
      v[i] = o.b2 * v[i]! + (1 - o.b2) * gi * gi;
      p[i] = p[i]! * (1 - o.lr * o.wd) - (o.lr / bias1) * (m[i]! / (Math.sqrt(v[i]!) / Math.sqrt(bias2) + o.eps));
    }
    s.m.set(name, m);
    s.v.set(name, v);
  }
  return norm;
}

test("AdamW with clipping and weight decay matches the float64 reference over three steps", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 5 });
  const o = { lr: 0.01, b1: 0.9, b2: 0.95, eps: 1e-8, wd: 0.1, maxNorm: 0 };
  using opt = NativeOptimizer.create(model, { beta1: o.b1, beta2: o.b2, eps: o.eps, weightDecay: o.wd });
  const state: Adam = { m: new Map(), v: new Map(), step: 0 };
  for (let k = 0; k < 3; k++) {
    trainStep(model, rows[k]!, SETTINGS);
    const params = readParams(model);
    const grads = readGrads(model);
    // Step 1 clips (the bound is below the norm), step 2 does not clip, step 3 has clipping off.
    const maxNorm = [0.05, 1e6, 0][k]!;
    const norm = referenceStep(params, grads, state, { ...o, maxNorm });
    const r = opt.step(o.lr, maxNorm);
    expect(r.skipped).toBe(false);
    expect(r.step).toBe(k + 1);
    expect(r.gradNorm).toBeCloseTo(norm, 12);
    if (k === 0) expect(norm).toBeGreaterThan(0.05);
    expect(maxRelDiff(readParams(model), params)).toBeLessThan(1e-12);
    expect([...readGrads(model).values()].every((g) => g.every((x) => x === 0))).toBe(true); // cleared
  }
});

test("a non-finite loss skips the update, clears the gradients and keeps the step count", async () => {
  using model = await tinyModel({ dtype: "f32" });
  using opt = NativeOptimizer.create(model);
  trainStep(model, rows[0]!, SETTINGS);
  opt.step(1e-3);
  const before = readParams(model);
  const poisoned = { ...rows[1]!, advantages: rows[1]!.advantages.map((a, t) => (t === 5 ? NaN : a)) };
  const m = trainStep(model, poisoned, SETTINGS);
  expect(Number.isNaN(m.all.loss)).toBe(true);
  trainStep(model, rows[2]!, SETTINGS); // a healthy micro-batch in the same step does not rescue it
  const r = opt.step(1e-3);
  expect(r.skipped).toBe(true);
  expect(r.step).toBe(1);
  expect(maxRelDiff(readParams(model), before)).toBe(0);
  expect([...readGrads(model).values()].every((g) => g.every((x) => x === 0))).toBe(true);
  trainStep(model, rows[2]!, SETTINGS);
  expect(opt.step(1e-3)).toMatchObject({ skipped: false, step: 2 });
});

test("saved optimizer state resumes exactly on another model with the same weights", async () => {
  using a = await tinyModel({ dtype: "f32", seed: 1 });
  using optA = NativeOptimizer.create(a, { weightDecay: 0.05 });
  for (const row of rows.slice(0, 2)) (trainStep(a, row, SETTINGS), optA.step(3e-3));
  const image = optA.saveState();

  using b = await tinyModel({ dtype: "f32", seed: 2 });
  for (const p of a.params()) b.setParam(p.name, a.getParam(p.name), "f32", p.shape);
  using optB = NativeOptimizer.create(b, { weightDecay: 0.05 });
  optB.loadState(image);
  for (const [model, opt] of [
    [a, optA],
    [b, optB],
  ] as const) {
    trainStep(model, rows[2]!, SETTINGS);
    expect(opt.step(3e-3).step).toBe(3);
  }
  expect(maxRelDiff(readParams(b), readParams(a))).toBe(0);
  expect(Array.from(optB.saveState())).toEqual(Array.from(optA.saveState()));
});

test("a state image of another model or a corrupt one is rejected and changes nothing", async () => {
  using small = await NativeModel.create(TINY);
  using other = await NativeModel.create({ ...TINY, num_hidden_layers: 1 });
  using opt = NativeOptimizer.create(small);
  using otherOpt = NativeOptimizer.create(other);
  trainStep(small, rows[0]!, SETTINGS);
  opt.step(1e-3);
  const good = opt.saveState();
  expect(() => opt.loadState(otherOpt.saveState())).toThrow(/bytes; this optimizer's is/);
  const badMagic = good.slice();
  badMagic[0] = 0;
  expect(() => opt.loadState(badMagic)).toThrow(/bad magic/);
  const badCount = good.slice();
  new DataView(badCount.buffer).setBigInt64(32, 7n, true); // the first parameter's element count
  expect(() => opt.loadState(badCount)).toThrow(/has 7 elements/);
  expect(Array.from(opt.saveState())).toEqual(Array.from(good));
});

test("the optimizer keeps its parameters alive after the model is freed", async () => {
  const model = await tinyModel();
  using opt = NativeOptimizer.create(model);
  trainStep(model, rows[0]!, SETTINGS);
  model.free();
  const r = opt.step(1e-3);
  expect(r.skipped).toBe(false);
  expect(r.gradNorm).toBeGreaterThan(0);
});

test("bf16 parameters are updated through float32 moments", async () => {
  using model = await tinyModel({ dtype: "bf16" });
  using opt = NativeOptimizer.create(model);
  const before = readParams(model);
  trainStep(model, rows[0]!, SETTINGS);
  expect(opt.step(1e-2).skipped).toBe(false);
  expect(maxRelDiff(readParams(model), before)).toBeGreaterThan(1e-3);
  expect(opt.saveState().byteLength).toBe(
    32 + model.params().reduce((n, p) => n + 8 + 2 * 4 * p.shape.reduce((a, b) => a * b, 1), 0),
  );
});

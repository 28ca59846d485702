// The loss of docs/architecture.md §6 on hand-computed vectors, through rlx_loss_eval (the train step's loss
// over given logprobs, float64). Reference values are computed here from the formulas in
// prime-rl's trainer/rl/loss.py, with the float32 rounding of the input streams.
import { describe, expect, test } from "bun:test";
import { NativeError } from "../../src/errors.ts";
import { loadNative } from "../../src/native/ffi.ts";
import { lossEval, type LossEvalRow, type LossSettings } from "../../src/native/train.ts";
import { rlLoss } from "../../src/data/loss_types.ts";

await loadNative();

const fr = Math.fround;
const N1: LossSettings = { nRl: 1, nCe: 1, nRefKl: 1 };

function row(logprobs: number[], fields: Partial<Omit<LossEvalRow, "logprobs">> = {}): LossEvalRow {
  const T = logprobs.length;
  return {
    logprobs: Float64Array.from(logprobs),
    lossMask: fields.lossMask ?? new Uint8Array(T),
    advantages: fields.advantages ?? new Float32Array(T),
    inferenceLogprobs: fields.inferenceLogprobs ?? new Float32Array(T),
    ...fields,
  };
}

describe("ce component (prime-rl test vectors)", () => {
  test("logprobs [-0.1,-0.5,-0.2], ce weights [1,0,1], N_ce = 2 gives 0.15, not gated by the loss mask", () => {
    const r = lossEval(row([-0.1, -0.5, -0.2], { ceWeights: Float32Array.from([1, 0, 1]) }), { ...N1, nCe: 2 });
    expect(r.all.loss).toBeCloseTo(0.15, 14);
    expect(r.all.ceCount).toBe(2);
    expect(r.all.nllSum).toBeCloseTo(0.3, 14);
    expect(r.all.mismatchKlCount).toBe(0); // ce tokens are not policy-sampled
    expect(Array.from(r.grad, (g) => g + 0)).toEqual([-0.5, 0, -0.5]);
  });

  test("weights [0.1,0,0.1] with N = 1 give 0.03", () => {
    const r = lossEval(row([-0.1, -0.5, -0.2], { ceWeights: Float32Array.from([0.1, 0, 0.1]) }), N1);
    expect(r.all.loss).toBeCloseTo(0.1 * fr(0.1) + 0.2 * fr(0.1), 14);
    expect(r.all.loss).toBeCloseTo(0.03, 8);
  });
});

// Five rl tokens, one per branch of the DPPO mask, plus one token outside the loss mask.
const RL = {
  lp: [-1.0, -0.2, -1.5, -1.0, -2.0, -0.3],
  ilp: [-1.1, -1.5, -0.2, -0.9, -0.5, -3.0],
  adv: [1.0, 1.0, -1.0, -0.5, 0.0, 2.0],
  mask: [1, 1, 1, 1, 1, 0],
};

function rlReference(cfg: { low: number; high: number; advTau: number; klTau: number }, weights?: number[]) {
  let loss = 0;
  const grad: number[] = [];
  const kept: boolean[] = [];
  RL.lp.forEach((lp, t) => {
    const ilp = fr(RL.ilp[t]!);
    const a = fr(RL.adv[t]!);
    const w = weights ? fr(weights[t]!) : 1;
    if (!RL.mask[t] || w === 0) return (grad.push(0), kept.push(false));
    const logRatio = lp - ilp;
    const ratio = Math.exp(logRatio);
    const dp = Math.exp(lp) - Math.exp(ilp);
    const masked = a > 0 ? dp > cfg.high : dp < -cfg.low;
    kept.push(!masked);
    loss += w * ((masked ? 0 : -cfg.advTau * a * ratio) + cfg.klTau * logRatio * logRatio);
    grad.push(w * ((masked ? 0 : -cfg.advTau * a * ratio) + 2 * cfg.klTau * logRatio));
  });
  return { loss, grad, kept };
}

function rlRow(fields: Partial<LossEvalRow> = {}) {
  return row(RL.lp, {
    lossMask: Uint8Array.from(RL.mask),
    advantages: Float32Array.from(RL.adv),
    inferenceLogprobs: Float32Array.from(RL.ilp),
    ...fields,
  });
}

describe("rl component (DPPO + KL)", () => {
  test("each mask branch: keep, masked high (A > 0), masked low (A < 0), keep (A < 0), A = 0 takes the low side", () => {
    const ref = rlReference({ low: 0.2, high: 0.2, advTau: 1, klTau: 1e-3 });
    expect(ref.kept).toEqual([true, false, false, true, false, false]);
    const r = lossEval(rlRow(), { ...N1, nRl: 4 });
    expect(r.all.loss).toBeCloseTo(ref.loss / 4, 13);
    for (let t = 0; t < 6; t++) expect(r.grad[t]!).toBeCloseTo(ref.grad[t]! / 4, 13);
    expect(r.all.rlCount).toBe(5);
    expect(r.all.rlSum).toBeCloseTo(ref.loss, 13);
    expect(r.all.maskedHigh).toBe(1);
    expect(r.all.maskedLow).toBe(2);
    expect(r.all.mismatchKlCount).toBe(5);
    const k3 = RL.lp.slice(0, 5).reduce((s, lp, t) => {
      const lr = lp - fr(RL.ilp[t]!);
      return s + Math.exp(lr) - lr - 1;
    }, 0);
    expect(r.all.mismatchKlSum).toBeCloseTo(k3, 13);
  });

  test("settings are honoured: wider masks keep everything; adv_tau and kl_tau scale their terms", () => {
    const cfg = { low: 0.9, high: 0.9, advTau: 0.5, klTau: 0.1 };
    const ref = rlReference(cfg);
    expect(ref.kept.slice(0, 5)).toEqual([true, true, true, true, true]);
    const r = lossEval(rlRow(), {
      ...N1,
      losses: [rlLoss({ dppo_mask_low: 0.9, dppo_mask_high: 0.9, adv_tau: 0.5, kl_tau: 0.1 })],
    });
    expect(r.all.loss).toBeCloseTo(ref.loss, 13);
    for (let t = 0; t < 6; t++) expect(r.grad[t]!).toBeCloseTo(ref.grad[t]!, 13);
    expect(r.all.maskedHigh + r.all.maskedLow).toBe(0);
  });

  test("rl weights scale tokens and a zero weight removes a token from the component", () => {
    const weights = [2, 0.5, 0, 1, 3, 7];
    const ref = rlReference({ low: 0.2, high: 0.2, advTau: 1, klTau: 1e-3 }, weights);
    const r = lossEval(rlRow({ rlWeights: Float32Array.from(weights) }), N1);
    expect(r.all.loss).toBeCloseTo(ref.loss, 13);
    for (let t = 0; t < 6; t++) expect(r.grad[t]!).toBeCloseTo(ref.grad[t]!, 13);
    expect(r.all.rlCount).toBe(4);
    expect(r.all.mismatchKlCount).toBe(4);
  });

  test("an explicit all-ones rl stream is bit-identical to an absent one", () => {
    const absent = lossEval(rlRow(), { ...N1, nRl: 3 });
    const ones = lossEval(rlRow({ rlWeights: new Float32Array(6).fill(1) }), { ...N1, nRl: 3 });
    expect(ones.all).toEqual(absent.all);
    expect(Array.from(ones.grad)).toEqual(Array.from(absent.grad));
  });
});

describe("ref_kl component", () => {
  test("stopgrad(ref_lp - lp) is the advantage, masked one-sided at dp < -0.2, fixed 1e-3 KL", () => {
    const lp = [-1.0, -1.5, -0.4];
    const ilp = [-1.2, -0.3, -0.4];
    const rlp = [-0.5, -0.2, -2.0];
    const w = [1, 1, 0.5];
    let loss = 0;
    const grad: number[] = [];
    lp.forEach((x, t) => {
      const lr = x - fr(ilp[t]!);
      const masked = Math.exp(x) - Math.exp(fr(ilp[t]!)) < -0.2;
      const adv = fr(rlp[t]!) - x;
      loss += fr(w[t]!) * ((masked ? 0 : -adv * Math.exp(lr)) + 1e-3 * lr * lr);
      grad.push(fr(w[t]!) * ((masked ? 0 : -adv * Math.exp(lr)) + 2e-3 * lr));
    });
    const r = lossEval(
      row(lp, {
        inferenceLogprobs: Float32Array.from(ilp),
        refLogprobs: Float32Array.from(rlp),
        refKlWeights: Float32Array.from(w),
        lossMask: Uint8Array.from([1, 1, 1]),
        rlWeights: new Float32Array(3),
      }),
      { ...N1, nRefKl: 2 },
    );
    expect(r.all.loss).toBeCloseTo(loss / 2, 13);
    for (let t = 0; t < 3; t++) expect(r.grad[t]!).toBeCloseTo(grad[t]! / 2, 13);
    expect(r.all.refKlCount).toBe(3);
    expect(r.all.refKlMasked).toBe(1);
    expect(r.all.rlCount).toBe(0);
    expect(r.all.mismatchKlCount).toBe(3); // ref_kl tokens are policy-sampled
    expect(r.all.refKlAdvSum).toBeCloseTo(fr(-0.5) + 1 + fr(-0.2) + 1.5 + fr(-2.0) + 0.4, 13);
  });

  test("ref_kl weights without reference logprobs are an error", () => {
    expect(() => lossEval(row([-1], { refKlWeights: Float32Array.from([1]) }), N1)).toThrow(/ref_logprobs is null/);
  });
});

test("overlapping components add: loss(rl + ce) = loss(rl) + loss(ce), each over its own N", () => {
  const ce = Float32Array.from([0.5, 1, 0, 0, 2, 1]);
  const settings = { ...N1, nRl: 4, nCe: 8 };
  const both = lossEval(rlRow({ ceWeights: ce }), settings);
  const rlOnly = lossEval(rlRow(), settings);
  const ceOnly = lossEval(rlRow({ ceWeights: ce, lossMask: new Uint8Array(6) }), settings);
  expect(ceOnly.all.rlCount).toBe(0);
  expect(both.all.loss).toBeCloseTo(rlOnly.all.loss + ceOnly.all.loss, 14);
  for (let t = 0; t < 6; t++) expect(both.grad[t]!).toBeCloseTo(rlOnly.grad[t]! + ceOnly.grad[t]!, 14);
  expect(both.all.ceCount).toBe(4);
});

test("values off a component's members have no effect, even NaN or -inf", () => {
  const clean = lossEval(rlRow(), N1);
  const junk = lossEval(
    rlRow({
      advantages: Float32Array.from([...RL.adv.slice(0, 5), NaN]),
      inferenceLogprobs: Float32Array.from([...RL.ilp.slice(0, 5), -Infinity]),
      refLogprobs: Float32Array.from([NaN, NaN, NaN, NaN, NaN, NaN]),
    }),
    N1,
  );
  expect(junk.all).toEqual(clean.all);
  expect(Array.from(junk.grad)).toEqual(Array.from(clean.grad));
});

test("all components empty: loss exactly 0 and gradient exactly 0", () => {
  const r = lossEval(
    row([-1, -2, -3], {
      rlWeights: new Float32Array(3),
      ceWeights: new Float32Array(3),
      refKlWeights: new Float32Array(3),
    }),
    N1,
  );
  expect(r.all.loss).toBe(0);
  expect(Array.from(r.grad).every((g) => g === 0)).toBe(true);
  expect(lossEval(row([]), N1).all.loss).toBe(0);
});

test("per-env blocks partition the row's sums; env -1 only counts in the whole-row block", () => {
  const env = Int32Array.from([0, 1, 1, 0, -1, 1]);
  const r = lossEval(rlRow({ envIndex: env, ceWeights: Float32Array.from([1, 1, 1, 1, 1, 1]) }), N1, 2);
  expect(r.envs.length).toBe(2);
  expect(r.envs[0]!.tokens).toBe(2);
  expect(r.envs[1]!.tokens).toBe(3);
  expect(r.all.tokens).toBe(6);
  const untagged = Float32Array.from([1, 1, 1, 1, 0, 1]);
  const whole = lossEval(rlRow({ ceWeights: untagged, rlWeights: untagged }), N1);
  expect(r.envs[0]!.rlSum + r.envs[1]!.rlSum).toBeCloseTo(whole.all.rlSum, 13);
  expect(r.envs[0]!.ceSum + r.envs[1]!.ceSum).toBeCloseTo(whole.all.ceSum, 13);
  expect(r.envs[1]!.maskedHigh).toBe(1);
  expect(() => lossEval(rlRow({ envIndex: Int32Array.from([0, 2, 0, 0, 0, 0]) }), N1, 2)).toThrow(
    /env_index\[1\] = 2 but n_envs is 2/,
  );
});

test("denominators below 1 and short streams are rejected", () => {
  expect(() => lossEval(rlRow(), { ...N1, nRl: 0 })).toThrow(/must be >= 1/);
  expect(() => lossEval({ ...rlRow(), advantages: new Float32Array(2) }, N1)).toThrow(NativeError);
});

// The rl component's loss types and reductions ([trainer.loss] type / reduction, docs/architecture.md
// §6) on hand-computed float64 vectors through rlx_loss_eval: loss and dL/dlp of every type
// under every reduction against a reference written here from the formulas; the masking types
// give a token with ratio 1e6 (or one that overflows a double) a finite loss and exactly zero
// gradient while DPPO+KL keeps its KL term's gradient, bit-identical to the settings' defaults; sequence
// masking drops the whole sample.
import { describe, expect, test } from "bun:test";
import { native, loadNative } from "../../src/native/ffi.ts";
import { RL_REDUCTIONS, rlLoss, type RlLoss, type RlLossType, type RlReduction } from "../../src/data/loss_types.ts";
import {
  batchStruct,
  lossEval,
  lossStruct,
  type LossEvalRow,
  type LossSettings,
  METRIC_FIELDS,
} from "../../src/native/train.ts";

await loadNative();

const fr = Math.fround;
// Two samples (lengths 4 and 3) of rl tokens with assorted ratios and advantages; token 0 of the
// first sample and token 5 are outside the loss mask.
const LP = [-0.5, -1.0, -0.2, -1.5, -0.9, -0.3, -2.0];
const ILP = [-0.6, -1.1, -1.5, -0.2, -1.0, -3.0, -1.6];
const ADV = [0.0, 1.0, 1.0, -1.0, 0.5, 2.0, -0.5];
const MASK = [0, 1, 1, 1, 1, 0, 1];
const LENGTHS = [4, 3];
const S = { advTau: 1.5, klTau: 0.01, ipoThreshold: 0.1, isLow: 0.5, isHigh: 3.0, isCap: 2.0, constant: 7 };

function evalRow(lp: number[], ilp: number[] = ILP, adv: number[] = ADV): LossEvalRow {
  return {
    logprobs: Float64Array.from(lp),
    sampleLengths: Int32Array.from(LENGTHS),
    lossMask: Uint8Array.from(MASK),
    advantages: Float32Array.from(adv),
    inferenceLogprobs: Float32Array.from(ilp),
  };
}

/** The reference: per token loss and dloss/dlp of one type, then the reduction. */
function reference(type: RlLossType, reduction: RlReduction, lp: number[], ilp = ILP, adv = ADV) {
  const seg = LENGTHS.flatMap((n, s) => Array<number>(n).fill(s));
  const lr = lp.map((x, t) => x - fr(ilp[t]!));
  const seqLr = LENGTHS.map((_, s) => lr.reduce((sum, x, t) => sum + (seg[t] === s && MASK[t] ? x : 0), 0));
  const l: number[] = [];
  const g: number[] = [];
  lp.forEach((x, t) => {
    const a = fr(adv[t]!);
    if (!MASK[t]) return (l.push(0), g.push(0));
    const r = Math.exp(lr[t]!);
    if (type === "dppo_kl" || type === "ipo") {
      const dp = Math.exp(x) - Math.exp(fr(ilp[t]!));
      const masked = type === "ipo" ? Math.abs(dp) > S.ipoThreshold : a > 0 ? dp > 0.2 : dp < -0.2;
      const pg = masked ? 0 : -S.advTau * a * r;
      return (l.push(pg + S.klTau * lr[t]! ** 2), g.push(pg + 2 * S.klTau * lr[t]!));
    }
    const rho = type.startsWith("seq_") ? Math.exp(seqLr[seg[t]!]!) : r;
    const keep = type === "icepop" ? rho >= S.isLow && rho <= S.isHigh : type.endsWith("mis") ? rho <= S.isCap : true;
    const w = type.endsWith("tis") ? Math.min(rho, S.isCap) : rho;
    if (!keep) return (l.push(0), g.push(0));
    l.push(-S.advTau * a * w + S.klTau * lr[t]! ** 2);
    g.push(-S.advTau * a * w + 2 * S.klTau * lr[t]!);
  });
  const members = LENGTHS.map((_, s) => MASK.filter((m, t) => m && seg[t] === s).length);
  const nRl = 5;
  const nSeq = 2;
  const scale = seg.map((s) =>
    reduction === "token" ? 1 / nRl : reduction === "sequence" ? 1 / (members[s]! * nSeq) : 1 / (S.constant * nSeq),
  );
  return { loss: l.reduce((sum, x, t) => sum + x * scale[t]!, 0), grad: g.map((x, t) => x * scale[t]!) };
}

const settings = (type: RlLossType, reduction: RlReduction, more: Partial<RlLoss> = {}): LossSettings => ({
  nRl: 5,
  nCe: 1,
  nRefKl: 1,
  nRlSequences: 2,
  losses: [
    rlLoss({
      type,
      reduction,
      adv_tau: S.advTau,
      kl_tau: S.klTau,
      ipo_threshold: S.ipoThreshold,
      is_low: S.isLow,
      is_high: S.isHigh,
      is_cap: S.isCap,
      constant: S.constant,
      ...more,
    }),
  ],
});
// The trust-region and importance-sampling types (the clipping ones: loss_clip.test.ts).
const TYPES = ["dppo_kl", "ipo", "icepop", "tis", "mis", "seq_tis", "seq_mis"] as const;

describe("every loss type under every reduction equals the hand-computed loss and gradient", () => {
  for (const type of TYPES)
    for (const reduction of RL_REDUCTIONS)
      test(`${type}, ${reduction}`, () => {
        const out = lossEval(evalRow(LP), settings(type, reduction));
        const want = reference(type, reduction, LP);
        expect(Math.abs(out.all.loss - want.loss)).toBeLessThan(1e-12);
        out.grad.forEach((g, t) => expect(Math.abs(g - want.grad[t]!)).toBeLessThan(1e-12));
        expect(out.all.rlCount).toBe(5);
      });

  test("the vectors exercise every branch: some tokens masked by each masking type, some kept", () => {
    for (const type of ["dppo_kl", "ipo", "icepop", "mis"] as const) {
      const out = lossEval(evalRow(LP), settings(type, "token"));
      const masked = out.all.maskedLow + out.all.maskedHigh;
      expect(masked).toBeGreaterThan(0);
      expect(masked).toBeLessThan(5);
    }
    const tis = reference("tis", "token", LP);
    const plain = LP.map((x, t) => Math.exp(x - fr(ILP[t]!)));
    expect(plain.some((r, t) => MASK[t] && r > S.isCap)).toBe(true); // truncation bites
    expect(tis.grad.every(Number.isFinite)).toBe(true);
  });
});

describe("a token with ratio 1e6", () => {
  // Token 2: lp - ilp = ln(1e6), with a positive and then a negative advantage.
  const ilp = [...ILP];
  ilp[2] = fr(-0.2 - Math.log(1e6));
  const lp = [...LP];
  lp[2] = fr(ilp[2]) + Math.log(1e6);

  for (const sign of [1, -1])
    for (const type of ["icepop", "mis"] as const)
      test(`${type} (advantage ${sign > 0 ? "> 0" : "< 0"}): finite loss, zero gradient on it`, () => {
        const adv = ADV.map((a, t) => (t === 2 ? sign : a));
        const out = lossEval(evalRow(lp, ilp, adv), settings(type, "token"));
        expect(Number.isFinite(out.all.loss)).toBe(true);
        expect(out.grad[2]).toBe(0);
        expect(Math.abs(out.all.loss - reference(type, "token", lp, ilp, adv).loss)).toBeLessThan(1e-12);
      });

  test("a ratio that overflows a double (log ratio 800) is masked, never inf * 0", () => {
    const far = [...lp];
    far[2] = fr(ilp[2]!) + 800;
    for (const type of ["icepop", "mis", "seq_mis", "tis", "seq_tis"] as const) {
      const out = lossEval(evalRow(far, ilp), settings(type, "sequence"));
      expect(Number.isFinite(out.all.loss)).toBe(true);
      expect(out.grad.every(Number.isFinite)).toBe(true);
    }
  });

  test("seq_mis drops the whole sample: every token of it has zero gradient, the other sample trains", () => {
    const out = lossEval(evalRow(lp, ilp), settings("seq_mis", "token"));
    expect(Array.from(out.grad.subarray(0, 4))).toEqual([0, 0, 0, 0]);
    expect(out.grad[4]).not.toBe(0);
    expect(out.grad[6]).not.toBe(0);
    expect(out.all.maskedLow + out.all.maskedHigh).toBe(3); // the first sample's three members
  });

  test("dppo_kl keeps the KL term's gradient on it, bit-identical to the defaults' type and reduction", () => {
    const adv = ADV.map((a, t) => (t === 2 ? 1 : a)); // A > 0 and dp > 0.2: masked high
    const row = evalRow(lp, ilp, adv);
    const out = lossEval(row, settings("dppo_kl", "token"));
    const lr = lp[2]! - fr(ilp[2]!);
    expect(Math.abs(out.grad[2]! - (2 * S.klTau * lr) / 5)).toBeLessThan(1e-17);
    // The same row through the raw call, rlx_loss leaving type and reduction 0 (DPPO+KL, token mean).
    const loss = { nRl: 5, nCe: 1, nRefKl: 1, losses: [rlLoss({ adv_tau: S.advTau, kl_tau: S.klTau })] };
    const metrics = new Float64Array(METRIC_FIELDS.length); // RLX_METRICS_FIELDS
    const grad = new Float64Array(LP.length);
    const lib = native();
    const rc = lib.rlx_loss_eval(batchStruct(row, LP.length, 0), lossStruct(loss), row.logprobs, 0, null, metrics, metrics.length, grad, null); // prettier-ignore
    expect(rc).toBe(0);
    expect(Array.from(grad)).toEqual(Array.from(out.grad));
    expect(metrics[0]).toBe(out.all.loss);
  });
});

test("a loss config of another length, an unknown type or reduction are errors naming them", () => {
  expect(() => lossEval(evalRow(LP), { ...settings("dppo_kl", "token"), nRlSequences: 0 })).toThrow(
    /N_rl_sequences must be >= 1/,
  );
  expect(() => lossEval(evalRow(LP), settings("icepop", "token", { is_low: 4, is_high: 3 }))).toThrow(
    /is_low <= is_high/,
  );
  expect(() =>
    lossEval(evalRow(LP), {
      ...settings("dppo_kl", "token"),
      losses: [{ ...rlLoss(), type: "unknown" as RlLossType }],
    }),
  ).toThrow(/loss type -1 is not one of RLX_RL_/);
  expect(() => lossEval(evalRow(LP), settings("dppo_kl", "constant", { constant: 0 }))).toThrow(/divisor must be > 0/);
  expect(() => lossEval(evalRow(LP), settings("cispo", "token", { clip_high: -1 }))).toThrow(
    /clip_low and clip_high must be >= 0/,
  );
});

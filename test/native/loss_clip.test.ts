// The clipping rl loss types (gspo, cispo, clip_higher, gmpo; native/src/rl_clip.cpp) on a packed
// row of five samples through rlx_loss_eval, in float64: loss and dL/dlp under every reduction
// against a reference written here from the papers' formulas (the sequence-level ones per
// sample), central finite differences of the shim's own loss where the objective is the loss
// value (all but cispo, whose gradient is by definition that of a detached weight), the clip
// counts, and a row mixing loss types: its loss and gradient are the sums of its samples' trained
// alone with the step's denominators (micro-batch invariance), and a masked type's overflowing
// ratio in one sample never reaches another sample's gradient.
import { describe, expect, test } from "bun:test";
import { loadNative } from "../../src/native/ffi.ts";
import { RL_REDUCTIONS, rlLoss, type RlLoss, type RlReduction } from "../../src/data/loss_types.ts";
import { lossEval, type LossEvalRow, type LossSettings } from "../../src/native/train.ts";

await loadNative();

const fr = Math.fround;
// Five samples; the first token of each is outside the loss mask, as in a packed row, and so is
// one action token of sample 2. Advantages are per sample (GRPO's), both signs. Log ratios put
// members on each side of each type's range.
const LENGTHS = [4, 4, 4, 3, 3];
const ADV_S = [1, -0.5, 2, -1, 0.7];
const LR = [0, 0.5, -0.05, 0.1, 0, -0.45, 0.3, 0.02, 0, -0.6, 0.05, 0.45, 0, -0.3, -0.2, 0, -0.25, -0.15];
const MASK = [0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 1];
const SEG = LENGTHS.flatMap((n, s) => Array<number>(n).fill(s));
const ILP = SEG.map((_, t) => fr(-1 - 0.1 * t));
const LP = LR.map((x, t) => ILP[t]! + x);
const ADV = SEG.map((s) => ADV_S[s]!);
const N_RL = MASK.filter(Boolean).length;
const N_SEQ = LENGTHS.length;
const CONSTANT = 7;
const TYPES = ["gspo", "cispo", "clip_higher", "gmpo"] as const;
type ClipType = (typeof TYPES)[number];
// A range that puts gspo's sample ratios on both sides (its papers' 3e-4 / 4e-4 clips all but none).
const RANGES: Record<string, [number, number]> = { wide: [0.1, 0.15], paper: [NaN, NaN] };

function row(lp = LP, adv = ADV, lengths = LENGTHS, mask = MASK, ilp = ILP): LossEvalRow {
  return {
    logprobs: Float64Array.from(lp),
    sampleLengths: Int32Array.from(lengths),
    lossMask: Uint8Array.from(mask),
    advantages: Float32Array.from(adv),
    inferenceLogprobs: Float32Array.from(ilp),
  };
}

const settings = (losses: RlLoss[]): LossSettings => ({
  nRl: N_RL,
  nCe: 1,
  nRefKl: 1,
  nRlSequences: N_SEQ,
  losses,
});

function lossOf(type: ClipType, reduction: RlReduction, range: string): RlLoss {
  const [clip_low, clip_high] = RANGES[range]!;
  return rlLoss({
    type,
    reduction,
    constant: CONSTANT,
    ...(Number.isNaN(clip_low) ? {} : { clip_low, clip_high }),
  });
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The papers' objectives per member token: its value v (the sample's, for the sequence-level
 * types), dL/dlp of the token's own term, and whether its ratio is clipped low / high. */
function reference(l: RlLoss, lp: number[], adv = ADV) {
  const lr = lp.map((x, t) => x - ILP[t]!);
  const members = (s: number) => SEG.flatMap((seg, t) => (seg === s && MASK[t] ? [t] : []));
  const lo = 1 - l.clip_low;
  const hi = 1 + l.clip_high;
  const v: number[] = [];
  const g: number[] = [];
  let clippedLow = 0;
  let clippedHigh = 0;
  lp.forEach((_, t) => {
    if (!MASK[t]) return (v.push(0), g.push(0));
    const a = fr(adv[t]!);
    const own = members(SEG[t]!);
    if (l.type === "gmpo") {
      // y = the log ratio clipped on the side the advantage pushes; G = exp(mean y) over the sample
      const y = (u: number) => (a > 0 ? Math.min(lr[u]!, l.clip_high) : a < 0 ? Math.max(lr[u]!, -l.clip_low) : 0);
      const G = Math.exp(mean(own.map(y)));
      const free = a > 0 ? lr[t]! <= l.clip_high : a < 0 ? lr[t]! >= -l.clip_low : false;
      clippedLow += lr[t]! < -l.clip_low ? 1 : 0;
      clippedHigh += lr[t]! > l.clip_high ? 1 : 0;
      return (v.push(-a * G), g.push(free ? -a * G : 0));
    }
    // gspo: the sample's length-normalized ratio; the others: the token's own
    const r = l.type === "gspo" ? Math.exp(mean(own.map((u) => lr[u]!))) : Math.exp(lr[t]!);
    clippedLow += r < lo ? 1 : 0;
    clippedHigh += r > hi ? 1 : 0;
    const clipped = Math.min(Math.max(r, lo), hi);
    if (l.type === "cispo") return (v.push(-a * clipped), g.push(-a * clipped));
    // PPO: -min(r A, clip(r) A); the clipped branch has no gradient
    const dropped = (a > 0 && r > hi) || (a < 0 && r < lo);
    return (v.push(Math.max(-r * a, -clipped * a)), g.push(dropped ? 0 : -a * r));
  });
  const n = LENGTHS.map((_, s) => members(s).length);
  const scale = SEG.map((s) =>
    l.reduction === "token" ? 1 / N_RL : l.reduction === "sequence" ? 1 / (n[s]! * N_SEQ) : 1 / (CONSTANT * N_SEQ),
  );
  return {
    loss: v.reduce((sum, x, t) => sum + x * scale[t]!, 0),
    grad: g.map((x, t) => x * scale[t]!),
    clippedLow,
    clippedHigh,
  };
}

describe("each clipping type under each reduction equals the papers' formulas", () => {
  for (const type of TYPES)
    for (const reduction of RL_REDUCTIONS)
      for (const range of Object.keys(RANGES))
        test(`${type}, ${reduction}, ${range} clip range`, () => {
          const l = lossOf(type, reduction, range);
          const out = lossEval(row(), settings([l]));
          const want = reference(l, LP);
          expect(Math.abs(out.all.loss - want.loss)).toBeLessThan(1e-12);
          out.grad.forEach((g, t) => expect(Math.abs(g - want.grad[t]!)).toBeLessThan(1e-12));
          expect(out.all.rlCount).toBe(N_RL);
          expect([out.all.clippedLow, out.all.clippedHigh]).toEqual([want.clippedLow, want.clippedHigh]);
        });

  test("the vectors exercise every branch: members clipped on each side, and unclipped ones", () => {
    for (const type of TYPES) {
      const want = reference(lossOf(type, "token", type === "gspo" ? "wide" : "paper"), LP);
      if (type !== "cispo") expect(want.clippedLow).toBeGreaterThan(0); // cispo's default has no lower bound
      expect(want.clippedHigh).toBeGreaterThan(0);
      expect(want.clippedLow + want.clippedHigh).toBeLessThan(N_RL);
      // dropped members (zero gradient) on both advantage sides for the PPO-style types
      if (type === "clip_higher" || type === "gspo" || type === "gmpo") {
        const out = lossEval(row(), settings([lossOf(type, "token", "wide")]));
        expect(out.all.maskedHigh).toBeGreaterThan(0);
        expect(out.all.maskedLow).toBeGreaterThan(0);
      }
    }
    const cispo = lossEval(row(), settings([rlLoss({ type: "cispo", clip_low: 0.2 })]));
    expect(cispo.all.clippedLow).toBeGreaterThan(0);
    expect(cispo.all.maskedLow + cispo.all.maskedHigh).toBe(0); // cispo drops no token
    expect(Array.from(cispo.grad).filter((g, t) => MASK[t] && g === 0)).toEqual([]);
  });

  test("gspo's and gmpo's gradient is the sequence objective's: -A s (1/n) per member, 0 when clipped", () => {
    const l = rlLoss({ type: "gspo", clip_low: 0.1, clip_high: 0.15 }); // sequence reduction by default
    expect(l.reduction).toBe("sequence");
    const out = lossEval(row(), settings([l]));
    // sample 4 (A > 0, ratio below the range: unclipped side), two members
    const s4 = Math.exp(mean([-0.25, -0.15]));
    expect(Math.abs(out.grad[16]! - (-0.7 * s4) / (2 * N_SEQ))).toBeLessThan(1e-6); // A is float32 0.7
    // sample 0 (A > 0, ratio above the range): clipped, no gradient on any of its tokens
    expect(Array.from(out.grad.subarray(0, 4))).toEqual([0, 0, 0, 0]);
  });
});

describe("central finite differences of the shim's loss equal its gradient", () => {
  const h = 1e-6;
  for (const type of ["gspo", "clip_higher", "gmpo"] as const)
    for (const reduction of RL_REDUCTIONS)
      test(`${type}, ${reduction}`, () => {
        const s = settings([lossOf(type, reduction, "wide")]);
        const grad = lossEval(row(), s).grad;
        LP.forEach((_, t) => {
          const at = (d: number) => lossEval(row(LP.map((x, u) => (u === t ? x + d : x))), s).all.loss;
          expect(Math.abs((at(h) - at(-h)) / (2 * h) - grad[t]!)).toBeLessThan(1e-8);
        });
      });
});

describe("a row of mixed loss types", () => {
  // codes per sample into the table: dppo_kl (token), gspo (sequence), cispo (token), gmpo (constant)
  const table = [
    rlLoss(),
    rlLoss({ type: "gspo", clip_low: 0.1, clip_high: 0.15 }),
    rlLoss({ type: "cispo" }),
    rlLoss({ type: "gmpo", reduction: "constant", constant: CONSTANT }),
  ];
  const codes = [1, 0, 2, 3, 1];

  test("its loss and gradient are the sum of its samples' trained alone with the step's counts", () => {
    const whole = lossEval({ ...row(), sampleLosses: Int32Array.from(codes) }, settings(table));
    let loss = 0;
    const grad: number[] = [];
    let start = 0;
    LENGTHS.forEach((n, s) => {
      const cut = <T>(xs: T[]) => xs.slice(start, start + n);
      const alone = lossEval(row(cut(LP), cut(ADV), [n], cut(MASK), cut(ILP)), settings([table[codes[s]!]!]));
      loss += alone.all.loss;
      grad.push(...alone.grad);
      start += n;
    });
    expect(Math.abs(whole.all.loss - loss)).toBeLessThan(1e-14);
    whole.grad.forEach((g, t) => expect(Math.abs(g - grad[t]!)).toBeLessThan(1e-15));
    // and each sample's part is its type's reference
    const ref = codes.map((c, s) => (c === 0 ? undefined : reference(table[c]!, LP)));
    whole.grad.forEach((g, t) => {
      const r = ref[SEG[t]!];
      if (r) expect(Math.abs(g - r.grad[t]!)).toBeLessThan(1e-12);
    });
  });

  test("one sample's ratio that overflows a double, masked by seq_mis, leaves the others' gradient finite", () => {
    const lp = LP.map((x, t) => (SEG[t] === 0 && MASK[t] ? ILP[t]! + 800 : x));
    const out = lossEval(
      { ...row(lp), sampleLosses: Int32Array.from([1, 0, 2, 3, 0]) },
      settings([rlLoss({ type: "clip_higher" }), rlLoss({ type: "seq_mis" }), rlLoss({ type: "cispo" }), table[3]!]),
    );
    expect(Number.isFinite(out.all.loss)).toBe(true);
    expect(out.grad.every(Number.isFinite)).toBe(true);
    expect(Array.from(out.grad.subarray(0, 4))).toEqual([0, 0, 0, 0]);
  });

  test("clip_higher clamps the log ratio to ±20 as verl does: an A < 0 token's ratio past a float's range stays finite", () => {
    const t0 = SEG.findIndex((s, t) => s === 1 && MASK[t] === 1); // a member of sample 1, A = -0.5
    const far = (to: number) => LP.map((x, t) => (t === t0 ? ILP[t]! + to : x));
    const l = rlLoss({ type: "clip_higher" });
    const out = lossEval(row(far(100)), settings([l]));
    const ref = reference(l, far(20));
    expect(Math.abs(out.all.loss - ref.loss) / ref.loss).toBeLessThan(1e-12);
    expect(out.grad[t0]).toBe(0);
    out.grad.forEach((g, t) => t !== t0 && expect(Math.abs(g - ref.grad[t]!)).toBeLessThan(1e-12));
  });

  test("a sample code outside the table is an error naming it", () => {
    expect(() => lossEval({ ...row(), sampleLosses: Int32Array.from([0, 0, 4, 0, 0]) }, settings(table))).toThrow(
      "sample_losses[2] = 4 but the loss table has 4 entries",
    );
  });
});

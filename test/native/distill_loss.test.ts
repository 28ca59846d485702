// The distill component (docs/architecture.md §6) on float64 vectors through rlx_loss_eval: a
// hand-computed case (loss and dL/dlogits), every divergence against a reference written here from
// the formulas, dL/dlogits against central differences, k = vocabulary equal to the exact KL / JSD
// within 1e-6, empty slots and the tail floor, weights and the global count, a call with every
// distill field left empty bit-identical to lossEval without them, and the errors.
import { describe, expect, test } from "bun:test";
import { loadNative, native } from "../../src/native/ffi.ts";
import { batchStruct, lossEval, lossStruct, type LossEvalRow, METRIC_FIELDS } from "../../src/native/train.ts";
import { rlLoss } from "../../src/data/loss_types.ts";

await loadNative();

const fr = Math.fround;
const logsumexp = (xs: number[]) => {
  const m = Math.max(...xs);
  return m + Math.log(xs.reduce((s, x) => s + Math.exp(x - m), 0));
};
const logSoftmax = (z: number[]) => {
  const lse = logsumexp(z);
  return z.map((x) => x - lse);
};

/** The divergence of one token from the formulas: buckets = the k ids, then the tail. */
function reference(logits: number[], ids: number[], tlp: number[], beta: number): number {
  const ls = logSoftmax(logits);
  const listed = ids.map((id, j) => ({ id, t: fr(tlp[j]!) })).filter((x) => x.id >= 0);
  const studentB = listed.map((x) => ls[x.id]!);
  const teacherB = listed.map((x) => x.t);
  if (listed.length < logits.length) {
    const rest = logits.filter((_, i) => !listed.some((x) => x.id === i));
    studentB.push(logsumexp(rest) - logsumexp(logits));
    teacherB.push(Math.log(Math.max(1e-8, 1 - teacherB.reduce((s, t) => s + Math.exp(t), 0))));
  }
  const kl = (a: number[], b: number[]) => a.reduce((s, x, i) => s + Math.exp(x) * (x - b[i]!), 0);
  if (beta === 0) return kl(teacherB, studentB);
  if (beta === 1) return kl(studentB, teacherB);
  const m = teacherB.map((t, i) => Math.log(beta * Math.exp(t) + (1 - beta) * Math.exp(studentB[i]!)));
  return beta * kl(teacherB, m) + (1 - beta) * kl(studentB, m);
}

interface Tok {
  logits: number[];
  ids: number[];
  tlp: number[];
  beta: number;
  w: number;
}

/** A row of distill tokens (no other component), token 0 included: loss eval has no first-token rule. */
function row(toks: Tok[], k: number): LossEvalRow {
  const T = toks.length;
  const V = toks[0]!.logits.length;
  return {
    logprobs: new Float64Array(T),
    lossMask: new Uint8Array(T).fill(1),
    advantages: new Float32Array(T),
    inferenceLogprobs: new Float32Array(T),
    rlWeights: new Float32Array(T),
    distillWeights: Float32Array.from(toks.map((t) => t.w)),
    distillBetas: Float32Array.from(toks.map((t) => t.beta)),
    distillK: k,
    distillIds: Int32Array.from(toks.flatMap((t) => t.ids)),
    distillLogprobs: Float32Array.from(toks.flatMap((t) => t.tlp)),
    studentLogits: Float64Array.from(toks.flatMap((t) => t.logits)),
    vocab: V,
  };
}

function rand(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32;
}

/** k distinct ids of V, the teacher's logprobs of them from its own logits. */
function randomTok(r: () => number, V: number, k: number, beta: number, empty = 0): Tok {
  const logits = Array.from({ length: V }, () => 3 * (r() - 0.5));
  const teacher = logSoftmax(Array.from({ length: V }, () => 4 * (r() - 0.5)));
  const order = teacher.map((_, i) => i).sort((a, b) => teacher[b]! - teacher[a]!);
  const ids = order.slice(0, k).map((id, j) => (j >= k - empty ? -1 : id));
  return { logits, ids, tlp: ids.map((id) => (id >= 0 ? fr(teacher[id]!) : 0)), beta, w: 1 };
}

describe("the distill divergence", () => {
  test("hand-computed: p_S = [1/4, 1/2, 1/4], the teacher's top-1 is id 1 at 0.8 (tail 0.2)", () => {
    const t8 = fr(Math.log(0.8));
    const p = Math.exp(t8); // the float32 0.8 the shim reads
    const tok = { logits: [0, Math.log(2), 0], ids: [1], tlp: [t8], beta: 0, w: 1 };
    const out = lossEval(row([tok], 1), { nRl: 1, nCe: 1, nRefKl: 1, nDistill: 1 });
    // forward KL over buckets {1} and {0, 2}: 0.8 ln(0.8 / 0.5) + 0.2 ln(0.2 / 0.5)
    expect(Math.abs(out.all.loss - (p * Math.log(p / 0.5) + (1 - p) * Math.log((1 - p) / 0.5)))).toBeLessThan(1e-15);
    // dL/dz_i = p_S(i) - p_T(b(i)) p_S(i) / p_S(b(i)): [0.25 - 0.2 * 0.5, 0.5 - 0.8, 0.25 - 0.2 * 0.5]
    const want = [0.25 - (1 - p) * 0.5, 0.5 - p, 0.25 - (1 - p) * 0.5];
    want.forEach((g, i) => expect(Math.abs(out.gradLogits[i]! - g)).toBeLessThan(1e-15));
    expect(out.all.distillCount).toBe(1);
    expect(out.all.distillSum).toBe(out.all.loss);
    // reverse KL: 0.5 ln(0.5 / 0.8) + 0.5 ln(0.5 / 0.2)
    const rev = lossEval(row([{ ...tok, beta: 1 }], 1), { nRl: 1, nCe: 1, nRefKl: 1, nDistill: 1 });
    expect(Math.abs(rev.all.loss - (0.5 * Math.log(0.5 / p) + 0.5 * Math.log(0.5 / (1 - p))))).toBeLessThan(1e-15);
  });

  for (const beta of [0, 1, 0.5, 0.1, 0.9]) {
    test(`beta ${beta}: loss against the reference, dL/dlogits against central differences`, () => {
      const r = rand(7 + beta * 10);
      const V = 11;
      const toks = [randomTok(r, V, 4, beta), randomTok(r, V, 6, beta, 2), randomTok(r, V, 1, beta)];
      toks[1]!.w = 0.5;
      const base = row(toks, 6 + 0); // widen every token to 6 slots (empty slots -1)
      const k = 6;
      const ids: number[] = [];
      const tlp: number[] = [];
      for (const t of toks) {
        ids.push(...t.ids, ...Array<number>(k - t.ids.length).fill(-1));
        tlp.push(...t.tlp, ...Array<number>(k - t.tlp.length).fill(0));
      }
      base.distillIds = Int32Array.from(ids);
      base.distillLogprobs = Float32Array.from(tlp);
      const settings = { nRl: 1, nCe: 1, nRefKl: 1, nDistill: 4 };
      const out = lossEval(base, settings);
      // betas cross as float32, as the packed row carries them
      const want = toks.reduce((s, t) => s + (t.w * reference(t.logits, t.ids, t.tlp, fr(beta))) / 4, 0);
      expect(Math.abs(out.all.loss - want)).toBeLessThan(1e-14);
      expect(out.all.distillCount).toBe(3);
      const h = 1e-6;
      const logits = base.studentLogits!;
      for (let i = 0; i < logits.length; i++) {
        const x = logits[i]!;
        logits[i] = x + h;
        const up = lossEval(base, settings).all.loss;
        logits[i] = x - h;
        const down = lossEval(base, settings).all.loss;
        logits[i] = x;
        expect(Math.abs((up - down) / (2 * h) - out.gradLogits[i]!)).toBeLessThan(1e-9);
      }
      expect(Math.max(...Array.from(out.gradLogits, Math.abs))).toBeGreaterThan(1e-3);
      expect(Array.from(out.grad)).toEqual(new Array(3).fill(0)); // distill does not touch the sampled token's lp
    });
  }

  test("k = vocabulary equals the exact KL and JSD within 1e-6 (no tail bucket)", () => {
    const r = rand(3);
    const V = 32;
    for (const beta of [0, 1, 0.5, 0.25]) {
      const student = Array.from({ length: V }, () => 6 * (r() - 0.5));
      const teacher = logSoftmax(Array.from({ length: V }, () => 6 * (r() - 0.5)));
      const ids = teacher.map((_, i) => i).sort((a, b) => teacher[b]! - teacher[a]!);
      const tok = { logits: student, ids, tlp: ids.map((i) => teacher[i]!), beta, w: 1 };
      const out = lossEval(row([tok], V), { nRl: 1, nCe: 1, nRefKl: 1, nDistill: 1 });
      // The exact divergence over the whole vocabulary from the float64 teacher.
      const s = logSoftmax(student);
      const kl = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + Math.exp(x) * (x - b[i]!), 0);
      const m = teacher.map((t, i) => Math.log(beta * Math.exp(t) + (1 - beta) * Math.exp(s[i]!)));
      const exact =
        beta === 0 ? kl(teacher, s) : beta === 1 ? kl(s, teacher) : beta * kl(teacher, m) + (1 - beta) * kl(s, m);
      expect(exact).toBeGreaterThan(0.05);
      expect(Math.abs(out.all.loss - exact)).toBeLessThan(1e-6);
    }
  });

  test("a teacher whose listed mass rounds past 1 gets the floored tail, and the loss stays finite", () => {
    const tok = { logits: [2, 0, -1, -30], ids: [0, 1, 2], tlp: [-0.01, -5, -6].map(fr), beta: 1, w: 1 };
    const out = lossEval(row([tok], 3), { nRl: 1, nCe: 1, nRefKl: 1, nDistill: 1 });
    expect(Number.isFinite(out.all.loss)).toBe(true);
    expect(Math.abs(out.all.loss - reference(tok.logits, tok.ids, tok.tlp, 1))).toBeLessThan(1e-14);
    expect(out.gradLogits.every(Number.isFinite)).toBe(true);
  });

  test("no distill field: bit-identical to a raw call leaving them empty; streams with no member add exactly 0", () => {
    const lp = Float64Array.from([-0.5, -1.0, -0.2, -1.5]);
    const base = {
      logprobs: lp,
      lossMask: Uint8Array.from([0, 1, 1, 1]),
      advantages: Float32Array.from([0, 1, -0.5, 0.25]),
      inferenceLogprobs: Float32Array.from([0, -1.1, -0.1, -1.4]),
    };
    const settings = { nRl: 3, nCe: 1, nRefKl: 1, losses: [rlLoss({ kl_tau: 0.01 })] };
    const v5 = lossEval(base, settings);
    const metrics = new Float64Array(METRIC_FIELDS.length);
    const grad = new Float64Array(4);
    // rlx_batch with only the rl streams, rlx_loss with n_distill 0: the call without distill.
    const batch = batchStruct({ lossMask: base.lossMask, advantages: base.advantages, inferenceLogprobs: base.inferenceLogprobs }, 4, 0); // prettier-ignore
    const lib = native();
    const rc = lib.rlx_loss_eval(
      batch,
      lossStruct({ ...settings, nDistill: 0 }),
      lp,
      0,
      null,
      metrics,
      metrics.length,
      grad,
      null,
    );
    expect(rc).toBe(0);
    expect(Array.from(grad)).toEqual(Array.from(v5.grad));
    expect(Array.from(metrics).slice(0, 17)).toEqual(Array.from(Object.values(v5.all)).slice(0, 17));
    const idle = lossEval(
      {
        ...base,
        distillWeights: new Float32Array(4),
        distillK: 2,
        distillIds: Int32Array.from([1, 2, 1, 2, 1, 2, 1, 2]),
        distillLogprobs: new Float32Array(8).fill(-1),
        studentLogits: new Float64Array(4 * 3),
        vocab: 3,
      },
      { ...settings, nDistill: 1 },
    );
    expect(Array.from(idle.grad)).toEqual(Array.from(v5.grad));
    expect(idle.all.loss).toBe(v5.all.loss);
    expect(idle.gradLogits.every((g) => g === 0)).toBe(true);
  });
});

describe("errors name the stream, the token and the fix", () => {
  const tok = { logits: [0, 1, 2, 3], ids: [1, 2], tlp: [-1, -2], beta: 0, w: 1 };
  const s = { nRl: 1, nCe: 1, nRefKl: 1, nDistill: 1 };
  test("an id outside the vocabulary, a repeated id, a non-finite logprob, a beta outside [0, 1]", () => {
    expect(() => lossEval(row([{ ...tok, ids: [1, 4] }], 2), s)).toThrow(
      /distill_ids\[1\] \(token 0, slot 1\) = 4 is outside the vocabulary \(size 4/,
    );
    expect(() => lossEval(row([{ ...tok, ids: [2, 2] }], 2), s)).toThrow(/distill_ids of token 0 repeat id 2/);
    expect(() => lossEval(row([{ ...tok, tlp: [-1, -Infinity] }], 2), s)).toThrow(/distill_logprobs\[1\].*not finite/);
    expect(() => lossEval(row([{ ...tok, beta: 1.5 }], 2), s)).toThrow(
      /distill_betas\[0\] = 1.5.* must be in \[0, 1\]/,
    );
  });

  test("members with k = 0, or without N_distill in the loss settings", () => {
    const r = row([tok], 2);
    expect(() => lossEval({ ...r, distillK: 0, distillIds: undefined, distillLogprobs: undefined }, s)).toThrow(
      /distill weights are set but distill_k is 0/,
    );
    const metrics = new Float64Array(METRIC_FIELDS.length);
    const lib = native();
    const rc = lib.rlx_loss_eval(batchStruct({ ...r, distillK: 2 }, 1, 0), lossStruct({ ...s, nDistill: 0 }), r.logprobs, 4, r.studentLogits!, metrics, metrics.length, null, null); // prettier-ignore
    expect(rc).toBe(-1);
    expect(String(lib.rlx_last_error())).toMatch(/distill members need N_distill/);
  });
});

// Test fixtures for the algorithms layer: a compact rollout builder, and a pure-TypeScript policy
// that implements the trainer's loss (DESIGN §6) exactly, in float64, over a context-free unigram
// model (lp_t = log softmax(theta / temperature_t)[token_t]). The unigram model is as simple as a
// model can be while still having a real gradient per token, which is what the denominator,
// routing and micro-batch tests need; the native step test checks the same properties on a
// transformer.
import type { PackedRow } from "../../../src/orchestrator/pack.ts";
import type { Role, Rollout, Segment } from "../../../src/orchestrator/types.ts";
import { Rng } from "../../../src/envs/random.ts";
import { type Denominators, type LossSettings, type MetricSums, type OptimizerResult, type Policy, type RowResult, zeroSums } from "../../../src/trainer/step.ts";

export interface SegmentSpec {
  role: Role;
  /** Token ids, or a count (ids 1..n offset by the segment's position). */
  tokens: number[] | number;
  sampled?: boolean;
  logprobs?: number[];
  isContent?: boolean[];
  messageIndex: number;
  sample?: number;
  temperature?: number;
}

let nextId = 0;

/** A rollout from segment specs; sampled segments get logprobs -0.5 unless given. */
export function makeRollout(segments: SegmentSpec[], extra: Partial<Rollout> = {}): Rollout {
  let tokenBase = 10;
  const segs: Segment[] = segments.map((spec) => {
    const tokenIds = typeof spec.tokens === "number" ? Array.from({ length: spec.tokens }, (_, i) => tokenBase + i) : spec.tokens;
    tokenBase += tokenIds.length;
    const sampled = spec.sampled ?? false;
    return {
      role: spec.role,
      tokenIds,
      sampled,
      logprobs: sampled ? (spec.logprobs ?? tokenIds.map(() => -0.5)) : undefined,
      isContent: spec.isContent,
      messageIndex: spec.messageIndex,
      sample: spec.sample ?? 0,
      temperature: sampled ? (spec.temperature ?? 1) : undefined,
    };
  });
  const id = extra.id ?? `r${nextId++}`;
  return {
    id,
    env: "math",
    taskId: "t0",
    groupId: "g0",
    task: { id: "t0", prompt: [], answer: "42" },
    messages: [],
    segments: segs,
    numSamples: 1 + Math.max(0, ...segs.map((s) => s.sample)),
    reward: 0,
    metrics: {},
    stopReason: "done",
    policyVersion: 0,
    numTurns: segs.filter((s) => s.sampled).length,
    info: {},
    ...extra,
  };
}

/** A single-turn rollout: `prompt` context tokens, then `completion` sampled tokens. */
export function singleTurn(reward: number, prompt = 3, completion = 2, extra: Partial<Rollout> = {}): Rollout {
  return makeRollout(
    [
      { role: "user", tokens: prompt, messageIndex: 0 },
      { role: "assistant", tokens: completion, sampled: true, messageIndex: 1 },
    ],
    { reward, ...extra },
  );
}

export const DEFAULT_LOSS: LossSettings = { dppo_mask_low: 0.2, dppo_mask_high: 0.2, adv_tau: 1, kl_tau: 1e-3 };

/** A seeded PRNG in [0, 1) (the envs' mulberry32). */
export function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.next();
}

/** The trainer's loss on a unigram model, in float64, with SGD as the optimizer. */
export class UnigramPolicy implements Policy {
  readonly theta: Float64Array;
  readonly grad: Float64Array;
  lastGrad = new Float64Array(0);

  constructor(readonly vocab: number, seed = 1) {
    const rand = rng(seed);
    this.theta = Float64Array.from({ length: vocab }, () => rand() - 0.5);
    this.grad = new Float64Array(vocab);
  }

  private probs(temperature: number): Float64Array {
    const z = this.theta.map((t) => t / temperature);
    const max = Math.max(...z);
    const e = z.map((v) => Math.exp(v - max));
    const sum = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / sum);
  }

  trainRow(row: PackedRow, numEnvs: number, n: Denominators, cfg: LossSettings): RowResult {
    const all = zeroSums();
    const perEnv = Array.from({ length: numEnvs }, zeroSums);
    const starts = new Set<number>();
    let offset = 0;
    for (const len of row.sampleLengths) starts.add(offset), (offset += len);
    for (let t = 0; t < row.tokenIds.length; t++) {
      const add = (field: keyof MetricSums, value: number) => {
        all[field] += value;
        const e = row.envIndex[t]!;
        if (e >= 0) perEnv[e]![field] += value;
      };
      add("tokens", 1);
      if (starts.has(t)) continue; // nothing in the sample predicts its first token
      const tau = row.temperatures[t]!;
      const p = this.probs(tau);
      const tok = row.tokenIds[t]!;
      const lp = Math.log(p[tok]!);
      const mask = row.lossMask[t] === 1;
      const rlW = row.rlWeights ? row.rlWeights[t]! : 1;
      const ceW = row.ceWeights ? row.ceWeights[t]! : 0;
      const refW = row.refKlWeights ? row.refKlWeights[t]! : 0;
      const rlM = mask && rlW !== 0;
      const ceM = ceW !== 0;
      const refM = refW !== 0;
      const ilp = rlM || refM ? row.inferenceLogprobs[t]! : lp;
      const logRatio = lp - ilp;
      const ratio = Math.exp(logRatio);
      const dp = Math.exp(lp) - Math.exp(ilp);
      const A = row.advantages[t]!;
      const maskedRl = A > 0 ? dp > cfg.dppo_mask_high : dp < -cfg.dppo_mask_low;
      const keepRl = rlM && !maskedRl ? 1 : 0;
      const lRl = (-keepRl * cfg.adv_tau * A * ratio + cfg.kl_tau * (rlM ? 1 : 0) * logRatio ** 2) * rlW;
      const dRl = (-keepRl * cfg.adv_tau * A * ratio + cfg.kl_tau * (rlM ? 1 : 0) * 2 * logRatio) * rlW;
      const lCe = -lp * ceW;
      const refAdv = (refM ? row.refLogprobs![t]! : lp) - lp;
      const maskedRef = dp < -0.2;
      const keepRef = refM && !maskedRef ? 1 : 0;
      const lRef = (-keepRef * refAdv * ratio + 1e-3 * (refM ? 1 : 0) * logRatio ** 2) * refW;
      const dRef = (-keepRef * refAdv * ratio + 1e-3 * (refM ? 1 : 0) * 2 * logRatio) * refW;
      const dLdlp = dRl / n.rl - ceW / n.ce + dRef / n.refKl;
      for (let v = 0; v < this.vocab; v++) this.grad[v]! += (dLdlp * ((v === tok ? 1 : 0) - p[v]!)) / tau;
      let entropy = 0;
      for (const q of p) if (q > 0) entropy -= q * Math.log(q);
      add("loss", lRl / n.rl + lCe / n.ce + lRef / n.refKl);
      add("rlSum", lRl);
      add("rlCount", rlM ? 1 : 0);
      add("ceSum", lCe);
      add("ceCount", ceM ? 1 : 0);
      add("refKlSum", lRef);
      add("refKlCount", refM ? 1 : 0);
      const policyM = mask && (rlM || refM) ? 1 : 0;
      add("mismatchKlSum", policyM * (ratio - logRatio - 1));
      add("mismatchKlCount", policyM);
      add("entropySum", mask ? entropy : 0);
      add("entropyCount", mask ? 1 : 0);
      add("maskedLow", rlM && maskedRl && A <= 0 ? 1 : 0);
      add("maskedHigh", rlM && maskedRl && A > 0 ? 1 : 0);
      add("refKlMasked", refM && maskedRef ? 1 : 0);
      add("refKlAdvSum", refM ? refAdv : 0);
      add("nllSum", ceM ? -lp : 0);
    }
    return { all, envs: perEnv };
  }

  optimizerStep(lr: number, maxGradNorm: number): OptimizerResult {
    const norm = Math.sqrt(this.grad.reduce((a, g) => a + g * g, 0));
    const scale = maxGradNorm > 0 && norm > maxGradNorm ? maxGradNorm / norm : 1;
    this.lastGrad = Float64Array.from(this.grad);
    for (let v = 0; v < this.vocab; v++) this.theta[v]! -= lr * scale * this.grad[v]!;
    this.grad.fill(0);
    return { gradNorm: norm, skipped: false };
  }
}

// The step driver against a pure-TypeScript policy that implements the trainer's loss exactly
// (fixtures.ts): global denominators, components that do not dilute each other, micro-batch
// invariance, the rl hot path, per-env metrics. test/native/step.test.ts repeats the gradient
// properties through the native shim on a tiny transformer.
import { describe, expect, test } from "bun:test";
import { packStep } from "../../../src/data/pack.ts";
import type { TrainingSample } from "../../../src/data/types.ts";
import { denominatorsOf, trainStep } from "../../../src/trainer/step.ts";
import { DEFAULT_LOSS, rng, UnigramPolicy } from "../../fixtures/rollouts.ts";

const VOCAB = 16;
const OPTS = { lr: 0.1, maxGradNorm: 0, losses: [DEFAULT_LOSS] };

/** A random sample: `prompt` context tokens, `actions` action tokens with random advantages and
 * inference logprobs near the model's (so the trust-region masks rarely fire). */
function randomSample(seed: number, prompt: number, actions: number, env = "math"): TrainingSample {
  const rand = rng(seed);
  const n = prompt + actions;
  const mask = Array.from({ length: n }, (_, i) => (i >= prompt ? 1 : 0));
  const adv = (rand() - 0.5) * 2;
  return {
    tokenIds: Array.from({ length: n }, () => Math.floor(rand() * VOCAB)),
    lossMask: mask,
    advantages: mask.map((m) => m * adv),
    inferenceLogprobs: mask.map((m) => (m ? -Math.log(VOCAB) + (rand() - 0.5) * 0.2 : 0)),
    temperatures: mask.map((m) => (m ? 0.9 : 1)),
    env,
    rolloutId: `s${seed}`,
  };
}
const asSft = (s: TrainingSample): TrainingSample => ({
  ...s,
  advantages: s.advantages.map(() => 0),
  rlWeights: s.lossMask.map(() => 0),
  ceWeights: [...s.lossMask],
});
const asOpd = (s: TrainingSample): TrainingSample => ({
  ...s,
  advantages: s.advantages.map(() => 0),
  rlWeights: s.lossMask.map(() => 0),
  refKlWeights: [...s.lossMask],
  refLogprobs: s.inferenceLogprobs.map((lp) => lp - 0.3),
});
const withObservationCe = (s: TrainingSample, prompt: number): TrainingSample => ({
  ...s,
  ceWeights: s.lossMask.map((_, i) => (i > 0 && i < prompt ? 0.1 : 0)),
});

/** The gradient and metrics of one step over `samples` from a fresh model. */
function gradientOf(samples: TrainingSample[], seqLen = 256) {
  const policy = new UnigramPolicy(VOCAB, 7);
  const result = trainStep(policy, packStep(samples, { seqLen }), OPTS);
  return { grad: policy.lastGrad, ...result };
}
const expectClose = (a: Float64Array, b: Float64Array, tol = 1e-12) => {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThan(tol);
};
const sum = (a: Float64Array, b: Float64Array) => a.map((x, i) => x + b[i]!);

describe("global denominators", () => {
  const grpo = [randomSample(1, 4, 6), randomSample(2, 3, 5), randomSample(3, 5, 4)];

  test("an sft sample packed beside grpo samples does not change the grpo gradient", () => {
    const sft = asSft(randomSample(4, 3, 7));
    const both = gradientOf([...grpo, sft]);
    const alone = gradientOf(grpo);
    const sftAlone = gradientOf([sft]);
    expect(both.denominators.rl).toBe(alone.denominators.rl);
    expectClose(both.grad, sum(alone.grad, sftAlone.grad));
    expect(both.metrics["loss/rl"]).toBeCloseTo(alone.metrics["loss/rl"]!, 12);
  });

  test("adding echo observation tokens does not change the rl term's gradient", () => {
    const plain = gradientOf(grpo);
    const withObs = gradientOf(grpo.map((s, i) => withObservationCe(s, [4, 3, 5][i]!)));
    const ceOnly = gradientOf(
      grpo.map((s, i) => ({ ...withObservationCe(s, [4, 3, 5][i]!), rlWeights: s.lossMask.map(() => 0) })),
    );
    expect(withObs.denominators.rl).toBe(plain.denominators.rl);
    expect(withObs.denominators.ce).toBe(3 + 2 + 4); // observation tokens 1..prompt-1 of each sample
    expectClose(withObs.grad, sum(plain.grad, ceOnly.grad));
    expect(withObs.metrics["count/ce"]).toBe(9);
  });

  test("the gradient does not depend on how the step is cut into micro-batches", () => {
    const mixed = [
      ...grpo,
      asSft(randomSample(5, 2, 3)),
      asOpd(randomSample(6, 3, 4)),
      withObservationCe(randomSample(7, 4, 2), 4),
    ];
    const oneRow = gradientOf(mixed, 256);
    const manyRows = gradientOf(mixed, 12);
    expect(manyRows.metrics.micro_batches).toBeGreaterThan(3);
    expect(oneRow.metrics.micro_batches).toBe(1);
    expectClose(oneRow.grad, manyRows.grad);
    expect(oneRow.metrics.loss).toBeCloseTo(manyRows.metrics.loss!, 12);
  });

  test("denominators are max(1, count) over the whole step, truncated tokens not counted", () => {
    expect(denominatorsOf(packStep(grpo, { seqLen: 16 }).rows)).toEqual({
      rl: 6 + 5 + 4,
      ce: 1,
      refKl: 1,
      distill: 1,
      rlSequences: 3,
    });
    expect(denominatorsOf(packStep(grpo, { seqLen: 8 }).rows)).toEqual({
      rl: 4 + 5 + 3,
      ce: 1,
      refKl: 1,
      distill: 1,
      rlSequences: 3,
    });
  });
});

test("an explicit all-ones rl stream gives the same loss and gradient as an absent one", () => {
  const absent = [randomSample(11, 3, 5), randomSample(12, 2, 6)];
  const explicit = absent.map((s) => ({ ...s, rlWeights: s.tokenIds.map(() => 1) }));
  const a = gradientOf(absent);
  const b = gradientOf(explicit);
  expect(Array.from(b.grad)).toEqual(Array.from(a.grad));
  expect(b.metrics.loss).toBe(a.metrics.loss!);
});

test("ref_kl routing zeros rl: an opd sample trains only its ref_kl term", () => {
  const opd = asOpd(randomSample(21, 3, 5));
  const { metrics } = gradientOf([opd]);
  expect(metrics["count/rl"]).toBe(0);
  expect(metrics["count/ref_kl"]).toBe(5);
  expect(metrics.loss).toBeCloseTo(metrics["loss/ref_kl"]!, 12);
});

test("a step with no member tokens has loss 0 and a zero gradient", () => {
  const none = { ...randomSample(31, 3, 3), rlWeights: [0, 0, 0, 0, 0, 0] };
  const { grad, metrics } = gradientOf([none]);
  expect(metrics.loss).toBe(0);
  expect(grad.every((g) => g === 0)).toBe(true);
});

test("per-env metrics partition the step's counts and loss", () => {
  const samples = [
    randomSample(41, 3, 4, "math"),
    asSft(randomSample(42, 2, 5, "forth")),
    randomSample(43, 4, 2, "math"),
  ];
  const { metrics, perEnv } = gradientOf(samples, 10);
  expect(Object.keys(perEnv).sort()).toEqual(["forth", "math"]);
  expect(perEnv.math!["count/rl"]).toBe(6);
  expect(perEnv.forth!["count/ce"]).toBe(5);
  expect(perEnv.math!.loss! + perEnv.forth!.loss!).toBeCloseTo(metrics.loss!, 12);
  expect(metrics.grad_norm).toBeGreaterThan(0);
});

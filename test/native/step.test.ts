// The algorithms layer end to end through the native shim on a tiny float64 transformer: rollouts
// scored by the real algorithms, turned into samples, packed, and run through the step driver and
// the native training call. The gradient properties the design promises (docs/architecture.md §6):
//   - an sft sample packed beside grpo samples does not change the grpo gradient;
//   - echo's observation tokens do not change the rl term's gradient;
//   - an explicit all-ones rl stream gives the same loss and gradient as an absent one;
//   - the gradient does not depend on how pack.ts cut the step into rows, nor on whether a group's
//     shared prompt is packed once (shared prefixes) or with every sample.
// Gradients are read through a Learner that captures them instead of stepping; the last test
// trains one real AdamW step with the custom RLOO example.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { AlgoConfig } from "../../src/algorithms/registry.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { NativeOptimizer } from "../../src/native/train.ts";
import { finishGroup, finishRollout } from "../../src/algorithms/base.ts";
import { Echo } from "../../src/algorithms/echo.ts";
import { Grpo } from "../../src/algorithms/grpo.ts";
import { createAlgorithm } from "../../src/algorithms/registry.ts";
import { Sft } from "../../src/algorithms/sft.ts";
import { packStep } from "../../src/data/pack.ts";
import { filterZeroAdvantage, rolloutToSamples } from "../../src/algorithms/samples.ts";
import type { Rollout, TrainingSample } from "../../src/data/types.ts";
import { RL_REDUCTIONS } from "../../src/data/loss_types.ts";
import { nativeLearner, type Learner, type StepResult, trainStep } from "../../src/trainer/step.ts";
import { DEFAULT_LOSS, makeRollout } from "../fixtures/rollouts.ts";
import { readGrads, readParams, rng, tinyModel } from "./tiny_model.ts";
import { type RlLoss, rlLoss } from "../../src/data/loss_types.ts";

const VOCAB = 64;
const UNIFORM_LP = -Math.log(VOCAB);
const model = await tinyModel({ dtype: "f64", seed: 5 });

/** A multi-turn rollout with random tokens: prompt (`prompt` when given), action, tool output, action. */
function rollout(seed: number, reward: number, prompt?: number[]): Rollout {
  const rand = rng(seed);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * VOCAB));
  const lps = (n: number) => Array.from({ length: n }, () => UNIFORM_LP + (rand() - 0.5) * 0.1);
  return makeRollout(
    [
      { role: "user", tokens: prompt ?? ids(5), messageIndex: 0 },
      { role: "assistant", tokens: ids(4), sampled: true, logprobs: lps(4), messageIndex: 1 },
      { role: "tool", tokens: ids(6), isContent: [false, true, true, true, true, false], messageIndex: 2 },
      { role: "assistant", tokens: ids(3), sampled: true, logprobs: lps(3), messageIndex: 3 },
    ],
    { reward, env: seed % 2 ? "forth" : "math" },
  );
}

async function grpoSamples(): Promise<TrainingSample[]> {
  const group = [1, 0, 0.5, 0].map((r, i) => rollout(10 + i, r));
  await finishGroup(new Grpo(Grpo.schema.parse({ type: "grpo" })), group);
  return group.flatMap((r) => rolloutToSamples(r, "rl"));
}

async function echoSamples(): Promise<TrainingSample[]> {
  const algo = new Echo(Echo.schema.parse({ type: "echo" }));
  const group = [1, 0, 0.5, 0].map((r, i) => rollout(10 + i, r)); // the same rollouts as grpoSamples
  for (const r of group) await finishRollout(algo, r);
  await finishGroup(algo, group);
  return group.flatMap((r) => rolloutToSamples(r, "rl"));
}

async function sftSample(): Promise<TrainingSample[]> {
  const r = rollout(30, 1);
  await finishRollout(
    new Sft(Sft.schema.parse({ type: "sft", sampling: { source: { name: "t", base_url: "http://127.0.0.1:9/v1" } } })),
    r,
  );
  return rolloutToSamples(r, "ce");
}

/** Runs the step driver with the native training call; captures the gradient instead of stepping. */
function gradientOf(
  m: NativeModel,
  samples: TrainingSample[],
  seqLen = 256,
  loss: RlLoss = DEFAULT_LOSS,
  sharePrefixes = false,
): { grads: Map<string, Float64Array>; result: StepResult } {
  const inner = nativeLearner(m, undefined as unknown as NativeOptimizer);
  let grads = new Map<string, Float64Array>();
  const capture: Learner = {
    trainRow: (...args) => inner.trainRow(...args),
    optimizerStep: () => {
      grads = readGrads(m);
      m.zeroGrad();
      return { gradNorm: 0, skipped: false };
    },
  };
  const result = trainStep(capture, packStep(structuredClone(samples), { seqLen, sharePrefixes }), {
    lr: 0,
    maxGradNorm: 0,
    losses: [loss],
  });
  return { grads, result };
}

function expectSameGrads(a: Map<string, Float64Array>, b: Map<string, Float64Array>, tol = 1e-10): void {
  let worst = 0;
  let scale = 0;
  for (const [name, x] of a) {
    const y = b.get(name)!;
    for (let i = 0; i < x.length; i++) {
      worst = Math.max(worst, Math.abs(x[i]! - y[i]!));
      scale = Math.max(scale, Math.abs(y[i]!));
    }
  }
  expect(scale).toBeGreaterThan(0);
  expect(worst / scale).toBeLessThan(tol);
}
const addGrads = (a: Map<string, Float64Array>, b: Map<string, Float64Array>) =>
  new Map([...a].map(([k, v]) => [k, v.map((x, i) => x + b.get(k)![i]!)]));

describe("global denominators through the native step", () => {
  test("an sft sample packed beside grpo samples does not change the grpo gradient", async () => {
    const grpo = await grpoSamples();
    const sft = await sftSample();
    const both = gradientOf(model, [...grpo, ...sft]);
    expect(both.result.metrics.micro_batches).toBe(1); // packed beside each other in one row
    const alone = gradientOf(model, grpo);
    const sftAlone = gradientOf(model, sft);
    expect(both.result.denominators.rl).toBe(alone.result.denominators.rl);
    expectSameGrads(both.grads, addGrads(alone.grads, sftAlone.grads));
  });

  test("echo's observation tokens do not change the rl term's gradient", async () => {
    const grpo = await grpoSamples();
    const echo = await echoSamples();
    expect(echo.every((s) => s.ceWeights?.some((w) => w > 0))).toBe(true);
    const ceOnly = echo.map((s) => ({ ...s, rlWeights: s.lossMask.map(() => 0) }));
    const withObs = gradientOf(model, echo);
    const plain = gradientOf(model, grpo);
    expect(withObs.result.denominators.rl).toBe(plain.result.denominators.rl);
    expect(withObs.result.metrics["count/ce"]).toBe(4 * 4); // 4 content tokens of each tool output
    expectSameGrads(withObs.grads, addGrads(plain.grads, gradientOf(model, ceOnly).grads));
  });

  test("an explicit all-ones rl stream gives the same loss and gradient as an absent one", async () => {
    const absent = await grpoSamples();
    const explicit = absent.map((s) => ({ ...s, rlWeights: s.tokenIds.map(() => 1) }));
    const a = gradientOf(model, absent);
    const b = gradientOf(model, explicit);
    expect(b.result.metrics.loss).toBe(a.result.metrics.loss!);
    expectSameGrads(a.grads, b.grads, 1e-15);
  });

  test("the gradient does not depend on how the step is cut into rows", async () => {
    const mixed = [...(await echoSamples()), ...(await sftSample())];
    const one = gradientOf(model, mixed, 256);
    const many = gradientOf(model, mixed, 20);
    expect(many.result.metrics.micro_batches).toBe(5);
    expect(one.result.metrics.loss).toBeCloseTo(many.result.metrics.loss!, 12);
    expectSameGrads(one.grads, many.grads);
    expect(Object.keys(one.result.perEnv).sort()).toEqual(["forth", "math"]);
  });

  for (const loss of [DEFAULT_LOSS, rlLoss({ type: "seq_mis", reduction: "sequence", is_cap: 1.02 })])
    test(`a group's shared prompt packed once gives the gradient of the whole samples (${loss.type ?? "dppo_kl"}, ${loss.reduction ?? "token"})`, async () => {
      const rand = rng(3);
      const prompt = Array.from({ length: 24 }, () => Math.floor(rand() * VOCAB));
      const group = [1, 0, 0.5, 0, 1].map((r, i) => rollout(40 + i, r, prompt));
      await finishGroup(new Grpo(Grpo.schema.parse({ type: "grpo" })), group);
      const samples = [...group.flatMap((r) => rolloutToSamples(r, "rl")), ...(await sftSample())];
      const whole = gradientOf(model, samples, 256, loss);
      const shared = gradientOf(model, samples, 256, loss, true);
      expect(shared.result.metrics.tokens).toBe(whole.result.metrics.tokens! - 4 * 23); // 5 samples, 23 shared tokens
      expect(shared.result.metrics.loss).toBeCloseTo(whole.result.metrics.loss!, 12);
      expectSameGrads(shared.grads, whole.grads);
    });

  // Every reduction, with a token-level, a sequence-level and the default loss type: the sequence
  // and constant reductions divide by samples counted over the whole step (rlSequences), and a
  // sample's own member count is known in its row (samples are never split).
  for (const reduction of RL_REDUCTIONS)
    for (const type of ["dppo_kl", "tis", "seq_mis"] as const)
      test(`${reduction} reduction, ${type}: one row or five give the same gradient`, async () => {
        const loss = { ...DEFAULT_LOSS, type, reduction, constant: 11, is_cap: 1.02 };
        const mixed = [...(await echoSamples()), ...(await sftSample())];
        const one = gradientOf(model, mixed, 256, loss);
        const many = gradientOf(model, mixed, 20, loss);
        expect(many.result.metrics.micro_batches).toBe(5);
        expect(one.result.metrics.loss).toBeCloseTo(many.result.metrics.loss!, 12);
        expectSameGrads(one.grads, many.grads);
        // (Every sample here has 7 rl members, so the sequence mean equals the token mean; its own
        // semantics are checked on unequal samples in loss_types.test.ts.)
        if (reduction === "constant") {
          const token = gradientOf(model, mixed, 256, { ...loss, reduction: "token" });
          expect(Math.abs(token.result.metrics.loss! - one.result.metrics.loss!)).toBeGreaterThan(1e-9);
        }
      });
});

test("the custom RLOO example trains one AdamW step end to end", async () => {
  const m = await tinyModel({ dtype: "f32", seed: 9 });
  using optimizer = NativeOptimizer.create(m);
  const config = {
    type: "custom",
    path: join(import.meta.dir, "../../examples/algorithms/rloo.ts"),
    sampling: { source: "policy" },
  } as AlgoConfig;
  const { algorithm } = await createAlgorithm(
    config,
    { source: "test", path: ["orchestrator", "algo"] },
    { isPolicyUrl: () => false },
  );
  const group = [1, 0, 0, 1].map((r, i) => rollout(50 + i, r));
  await finishGroup(algorithm, group);
  const { kept } = filterZeroAdvantage(group.flatMap((r) => rolloutToSamples(r, algorithm.kind.actionLossType)));
  const before = readParams(m);
  const { metrics } = trainStep(nativeLearner(m, optimizer), packStep(kept, { seqLen: 64 }), {
    lr: 1e-3,
    maxGradNorm: 1,
    losses: [DEFAULT_LOSS],
  });
  expect(metrics["count/rl"]).toBe(4 * 7);
  expect(Number.isFinite(metrics.loss)).toBe(true);
  expect(metrics.grad_norm).toBeGreaterThan(0);
  expect(metrics.skipped).toBe(0);
  const after = readParams(m);
  expect([...after].some(([name, v]) => v.some((x, i) => x !== before.get(name)![i]))).toBe(true);
  m.free();
});

// Where credit lands on tokens: advantage spreading, reference-logprob alignment, and the routing
// stamp into the three loss components (prime-rl's orchestrator/algo/routing.py, and its
// tests/unit/orchestrator/test_algorithms.py).
import { describe, expect, test } from "bun:test";
import {
  assignAdvantage,
  assignRefLogprobs,
  sampleSequences,
  stampLossRouting,
} from "../../../src/algorithms/routing.ts";
import type { TrainingSample } from "../../../src/data/types.ts";
import { makeRollout } from "../../fixtures/rollouts.ts";

// user(2) | assistant(2, sampled) | tool(1) | assistant(1, sampled)
const twoTurns = () =>
  makeRollout([
    { role: "user", tokens: 2, messageIndex: 0 },
    { role: "assistant", tokens: 2, sampled: true, messageIndex: 1 },
    { role: "tool", tokens: 1, messageIndex: 2 },
    { role: "assistant", tokens: 1, sampled: true, messageIndex: 3 },
  ]);

describe("assignAdvantage", () => {
  test("a scalar broadcasts over the action tokens only", () => {
    const r = twoTurns();
    assignAdvantage(r, 0.7);
    expect(r.advantages).toEqual([0, 0, 0.7, 0.7, 0, 0.7]);
    expect(r.advantage).toBe(0.7);
  });
  test("a list gives one value per action token, in order, across turns", () => {
    const r = twoTurns();
    assignAdvantage(r, [0.5, -0.5, 1]);
    expect(r.advantages).toEqual([0, 0, 0.5, -0.5, 0, 1]);
    expect(r.advantage).toBeCloseTo(1 / 3, 12);
  });
  test("a misaligned list is an error", () => {
    expect(() => assignAdvantage(twoTurns(), [1, 2])).toThrow(/must align with its 3 action tokens, got 2/);
  });
});

test("assignRefLogprobs keeps full-length scores on action tokens, 0 elsewhere", () => {
  const r = twoTurns();
  assignRefLogprobs(r, [0, -1, -2, -3, -4, -5]);
  expect(r.refLogprobs).toEqual([0, 0, -2, -3, 0, -5]);
  expect(() => assignRefLogprobs(r, [0, 1])).toThrow(/must have its length 6, got 2/);
});

test("sampleSequences cuts the token stream at extension breaks", () => {
  const r = makeRollout([
    { role: "user", tokens: [1, 2], messageIndex: 0 },
    { role: "assistant", tokens: [3], sampled: true, messageIndex: 1 },
    { role: "user", tokens: [4], messageIndex: 0, sample: 1 },
    { role: "assistant", tokens: [5, 6], sampled: true, messageIndex: 2, sample: 1 },
  ]);
  expect(sampleSequences(r)).toEqual([
    [1, 2, 3],
    [4, 5, 6],
  ]);
});

describe("stampLossRouting", () => {
  const sample = (over: Partial<TrainingSample> = {}): TrainingSample => ({
    tokenIds: [1, 2, 3, 4, 5, 6],
    lossMask: [0, 0, 1, 1, 0, 1],
    advantages: [0, 0, 1, 1, 0, 1],
    inferenceLogprobs: [0, 0, -1, -1, 0, -1],
    temperatures: [1, 1, 1, 1, 1, 1],
    env: "e",
    rolloutId: "r",
    ...over,
  });
  test("rl leaves every stream absent and keeps an algorithm's ce stream untouched", () => {
    const s = sample();
    stampLossRouting(s, "rl");
    expect([s.rlWeights, s.ceWeights, s.refKlWeights]).toEqual([undefined, undefined, undefined]);
    const echo = sample({ ceWeights: [0, 0, 0, 0, 0.1, 0] });
    stampLossRouting(echo, "rl");
    expect(echo.ceWeights).toEqual([0, 0, 0, 0, 0.1, 0]);
    expect(echo.rlWeights).toBeUndefined();
  });
  test("ce zeros rl and merges 1.0 on the action tokens into an existing ce stream", () => {
    const s = sample({ ceWeights: [0, 0, 0, 0, 0.1, 0] });
    stampLossRouting(s, "ce");
    expect(s.rlWeights).toEqual([0, 0, 0, 0, 0, 0]);
    expect(s.ceWeights).toEqual([0, 0, 1, 1, 0.1, 1]);
    const fresh = sample();
    stampLossRouting(fresh, "ce");
    expect(fresh.ceWeights).toEqual([0, 0, 1, 1, 0, 1]);
  });
  test("ref_kl zeros rl, writes 1.0 exactly on the action tokens, leaves ce alone", () => {
    const s = sample();
    stampLossRouting(s, "ref_kl");
    expect(s.rlWeights).toEqual([0, 0, 0, 0, 0, 0]);
    expect(s.refKlWeights).toEqual([0, 0, 1, 1, 0, 1]);
    expect(s.ceWeights).toBeUndefined();
  });
});

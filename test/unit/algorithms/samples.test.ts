// Scored rollout -> training samples, and the zero-advantage filter (docs/architecture.md §4; prime-rl's orchestrator filters the same way).
import { describe, expect, test } from "bun:test";
import { assignAdvantage } from "../../../src/algorithms/routing.ts";
import { filterZeroAdvantage, memberCounts, rolloutToSamples } from "../../../src/algorithms/samples.ts";
import { makeRollout, singleTurn } from "../../fixtures/rollouts.ts";

describe("rolloutToSamples", () => {
  test("one sample per rollout sample, every array cut at the boundary", () => {
    const r = makeRollout([
      { role: "user", tokens: [1, 2], messageIndex: 0 },
      { role: "assistant", tokens: [3, 4], sampled: true, messageIndex: 1, logprobs: [-0.1, -0.2], temperature: 0.7 },
      { role: "user", tokens: [1, 2], messageIndex: 0, sample: 1 },
      { role: "assistant", tokens: [5], sampled: true, messageIndex: 2, sample: 1, logprobs: [-0.3], temperature: 0.7 },
    ]);
    assignAdvantage(r, 2);
    r.ceWeights = [0, 0, 0, 0, 0, 0.5, 0];
    const [a, b] = rolloutToSamples(r, "rl");
    expect(a).toMatchObject({
      tokenIds: [1, 2, 3, 4],
      lossMask: [0, 0, 1, 1],
      advantages: [0, 0, 2, 2],
      inferenceLogprobs: [0, 0, -0.1, -0.2],
      temperatures: [1, 1, 0.7, 0.7],
      ceWeights: [0, 0, 0, 0],
      env: "math",
      rolloutId: r.id,
    });
    expect(b).toMatchObject({
      tokenIds: [1, 2, 5],
      lossMask: [0, 0, 1],
      advantages: [0, 0, 2],
      inferenceLogprobs: [0, 0, -0.3],
      ceWeights: [0, 0.5, 0],
    });
    expect(a!.rlWeights).toBeUndefined(); // rl routing: the hot path
  });
  test("unassigned advantages are zeros; a wrong-length annotation is an error naming it", () => {
    const r = singleTurn(1);
    expect(rolloutToSamples(r, "rl")[0]!.advantages).toEqual([0, 0, 0, 0, 0]);
    r.ceWeights = [1, 2];
    expect(() => rolloutToSamples(r, "rl")).toThrow(/ceWeights has 2 values, the rollout has 5 tokens/);
  });
});

describe("zero-advantage filter", () => {
  const samplesOf = (reward: number, component: "rl" | "ce" | "ref_kl", advantage?: number) => {
    const r = singleTurn(reward);
    if (advantage !== undefined) assignAdvantage(r, advantage);
    return rolloutToSamples(r, component);
  };
  test("drops rl samples whose advantage is 0, keeps the rest untouched on the hot path", () => {
    const zero = samplesOf(1, "rl", 0);
    const credit = samplesOf(1, "rl", 0.5);
    const result = filterZeroAdvantage([...zero, ...credit]);
    expect(result.kept).toEqual(credit);
    expect(result.kept[0]!.rlWeights).toBeUndefined();
    expect(result).toMatchObject({ dropped: 1, zeroedTokens: 2 });
  });
  test("removes only rl membership: echo's ce tokens keep the sample alive", () => {
    const r = makeRollout([
      { role: "user", tokens: 2, messageIndex: 0 },
      { role: "assistant", tokens: 1, sampled: true, messageIndex: 1 },
      { role: "tool", tokens: 2, messageIndex: 2 },
      { role: "assistant", tokens: 1, sampled: true, messageIndex: 3 },
    ]);
    assignAdvantage(r, 0);
    r.ceWeights = [0, 0, 0, 0.1, 0.1, 0];
    const { kept } = filterZeroAdvantage(rolloutToSamples(r, "rl"));
    expect(kept).toHaveLength(1);
    expect(kept[0]!.rlWeights).toEqual([0, 0, 0, 0, 0, 0]);
    expect(kept[0]!.ceWeights).toEqual([0, 0, 0, 0.1, 0.1, 0]);
    expect(memberCounts(kept[0]!)).toEqual({ rl: 0, ce: 2, refKl: 0, distill: 0, rlSequences: 0 });
  });
  test("never touches ce or ref_kl members (sft, opd carry no advantages)", () => {
    const sft = samplesOf(1, "ce");
    const opd = samplesOf(1, "ref_kl");
    const before = structuredClone([...sft, ...opd]);
    const result = filterZeroAdvantage([...sft, ...opd]);
    expect(result.kept).toEqual(before);
    expect(result.zeroedTokens).toBe(0);
  });
});

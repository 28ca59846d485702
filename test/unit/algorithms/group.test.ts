// The shared group math on hand-computed groups (prime-rl's orchestrator/algo/grpo.py and
// max_rl.py, and its tests/unit/orchestrator/test_algorithms.py).
import { describe, expect, test } from "bun:test";
import {
  centered,
  lengthShaped,
  maxRl,
  mean,
  std,
  stdNormalized,
  type RolloutSize,
} from "../../../src/algorithms/group.ts";

const W = { num_output_tokens_weight: 0.25, num_input_tokens_weight: 0.1, num_turns_weight: 0.1 };
const size = (output: number, input: number, turns: number): RolloutSize => ({ output, input, turns });
const close = (actual: number[], expected: number[]) =>
  actual.forEach((a, i) => expect(a).toBeCloseTo(expected[i]!, 12));

describe("grpo centering", () => {
  test("r - mean(r), zero-sum", () => {
    close(centered([1, 0, 0, 1]), [0.5, -0.5, -0.5, 0.5]);
    close(centered([0.2, 0.9, 0.4]), [-0.3, 0.4, -0.1]);
    expect(centered([0.2, 0.9, 0.4]).reduce((a, b) => a + b, 0)).toBeCloseTo(0, 12);
  });
  test("a uniform group and a singleton give all-zero advantages", () => {
    expect(centered([0.7, 0.7, 0.7])).toEqual([0, 0, 0]);
    expect(centered([1])).toEqual([0]);
    expect(stdNormalized([1, 1, 1, 1])).toEqual([0, 0, 0, 0]);
    expect(stdNormalized([1])).toEqual([0]);
  });
  test("std normalization divides by the N-1 std plus 1e-6", () => {
    // mean 0.5, squared deviations 4 x 0.25 = 1, / (4 - 1) -> std sqrt(1/3)
    expect(std([1, 0, 0, 1])).toBeCloseTo(Math.sqrt(1 / 3), 14);
    const a = 0.5 / (Math.sqrt(1 / 3) + 1e-6);
    close(stdNormalized([1, 0, 0, 1]), [a, -a, -a, a]);
    expect(a).toBeCloseTo(0.866024, 5);
  });
});

describe("linear length penalty", () => {
  test("equal sizes reduce to plain centering", () => {
    const sizes = [size(7, 5, 2), size(7, 5, 2), size(7, 5, 2)];
    close(centered(lengthShaped([1, 0, 1], sizes, W)), centered([1, 0, 1]));
  });
  test("longer outputs get lower advantage, still zero-mean", () => {
    // mean r = 1; frac = .25*out/20 + .1*5/5 + .1*1/1 = [.325, .45]; shaped = [.675, .55]
    const shaped = lengthShaped([1, 1], [size(10, 5, 1), size(20, 5, 1)], W);
    close(shaped, [0.675, 0.55]);
    close(centered(shaped), [0.0625, -0.0625]);
  });
  test("more input (observation) tokens and more turns are penalized", () => {
    const byInput = centered(lengthShaped([1, 1], [size(10, 5, 1), size(10, 50, 1)], W));
    expect(byInput[1]!).toBeLessThan(byInput[0]!);
    const byTurns = centered(lengthShaped([1, 1], [size(10, 5, 1), size(10, 5, 4)], W));
    expect(byTurns[1]!).toBeLessThan(byTurns[0]!);
  });
  test("a group with mean reward 0 is not penalized", () => {
    expect(lengthShaped([0, 0], [size(1, 1, 1), size(100, 100, 9)], W)).toEqual([0, 0]);
  });
});

describe("max_rl", () => {
  test("(r - mean) / mean", () => {
    close(maxRl([1, 0, 0, 0]), [3, -1, -1, -1]);
    close(
      maxRl([1, 1, 0, 0]),
      [1, 1, -1, -1].map((x) => x),
    );
  });
  test("zero when the mean is 0 or below; zero for an all-success group", () => {
    expect(maxRl([0, 0])).toEqual([0, 0]);
    expect(maxRl([-1, 0.5])).toEqual([0, 0]);
    expect(maxRl([1, 1])).toEqual([0, 0]);
  });
});

test("mean of nothing is 0; of equal values, exactly that value", () => {
  expect(mean([])).toBe(0);
  expect(mean([0.7, 0.7, 0.7])).toBe(0.7);
});

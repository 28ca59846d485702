// The LR schedule against hand-computed values: warmup ramps from lr/W, linear and cosine reach
// min_lr exactly at the last step, and constant ignores min_lr.
import { expect, test } from "bun:test";
import { learningRate } from "../../../src/trainer/schedule.ts";

const lr = 1e-3;

test("constant: lr at every step, after a linear warmup", () => {
  const s = { type: "constant" as const, warmup_steps: 4, min_lr: 1e-5 };
  expect([1, 2, 3, 4].map((step) => learningRate(step, lr, s, 10))).toEqual([2.5e-4, 5e-4, 7.5e-4, 1e-3]);
  expect(learningRate(5, lr, s, 10)).toBe(lr);
  expect(learningRate(10, lr, { ...s, warmup_steps: 0 }, 10)).toBe(lr);
});

test("linear: straight down from lr after warmup to min_lr at the last step", () => {
  const s = { type: "linear" as const, warmup_steps: 2, min_lr: 1e-4 };
  // progress = (step - 2) / 8; lr - 9e-4 * progress
  expect(learningRate(2, lr, s, 10)).toBeCloseTo(1e-3, 15);
  expect(learningRate(3, lr, s, 10)).toBeCloseTo(1e-3 - 9e-4 / 8, 15);
  expect(learningRate(6, lr, s, 10)).toBeCloseTo(5.5e-4, 15);
  expect(learningRate(10, lr, s, 10)).toBeCloseTo(1e-4, 15);
});

test("cosine: half a cosine from lr to min_lr", () => {
  const s = { type: "cosine" as const, warmup_steps: 0, min_lr: 0 };
  expect(learningRate(0, lr, s, 8)).toBeCloseTo(lr, 15);
  expect(learningRate(4, lr, s, 8)).toBeCloseTo(lr / 2, 15);
  expect(learningRate(2, lr, s, 8)).toBeCloseTo((lr * (1 + Math.SQRT1_2)) / 2, 15);
  expect(learningRate(8, lr, s, 8)).toBeCloseTo(0, 15);
  expect(learningRate(8, lr, { ...s, min_lr: 2e-4 }, 8)).toBeCloseTo(2e-4, 15);
});

test("a run no longer than its warmup never leaves the ramp; steps past the end stay at min_lr", () => {
  const s = { type: "cosine" as const, warmup_steps: 10, min_lr: 0 };
  expect(learningRate(5, lr, s, 5)).toBeCloseTo(5e-4, 15);
  expect(learningRate(12, lr, { ...s, warmup_steps: 2 }, 10)).toBeCloseTo(0, 15);
});

test("decay_steps: the decay ends there and min_lr holds after it, whatever the run's length", () => {
  const s = { type: "cosine" as const, warmup_steps: 0, min_lr: 1e-4, decay_steps: 8 };
  for (const maxSteps of [8, 20, 1000]) {
    expect(learningRate(4, lr, s, maxSteps)).toBeCloseTo((1e-3 + 1e-4) / 2, 15);
    expect([8, 9, 20].map((step) => learningRate(step, lr, s, maxSteps))).toEqual([1e-4, 1e-4, 1e-4]);
  }
  expect(learningRate(4, lr, { ...s, type: "linear" }, 100)).toBeCloseTo(1e-3 - 9e-4 / 2, 15);
});

// The shared-prefix row (rlx.h rlx_batch.sample_parents): samples that share a prompt, packed as the
// prompt once plus one continuation per sample, give the loss, the member counts and the gradient
// of the same samples packed whole, in float64 (1e-10) and float32 (1e-5), with every loss
// component, continuations of equal and unequal lengths, two prefixes and a lone sample in one row.
// Bad parents are refused with the index and the rule.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { NativeModel } from "../../src/native/model.ts";
import { trainStep, type LossSettings } from "../../src/native/train.ts";
import { group, shareRow } from "./fixtures/shared_rows.ts";
import { maxRelDiff, pack, readGrads, rng, TINY_FULL, tinyModel } from "./tiny_model.ts";
import type { TrainRow } from "../../src/data/train_row.ts";

setDefaultTimeout(60_000);

const LOSS: LossSettings = { nRl: 40, nCe: 12, nRefKl: 30 };

function stepOf(model: NativeModel, row: TrainRow) {
  model.zeroGrad();
  const metrics = trainStep(model, row, LOSS).all;
  return { metrics, grads: readGrads(model) };
}

describe("shared-prefix rows", () => {
  const rand = rng(17);
  const groups = [
    { prompt: 12, samples: group(rand, 12, [5, 5, 7, 5]) },
    { prompt: 9, samples: group(rand, 9, [4, 6, 6]) },
  ];
  const loners = group(rand, 6, [5]);
  const whole = pack([...groups.flatMap((g) => g.samples), ...loners]);
  const shared = shareRow(groups, loners);

  test("the shared row is shorter: each prompt once", () => {
    expect(shared.tokenIds.length).toBe(whole.tokenIds.length - (3 * 11 + 2 * 8));
  });

  for (const [dtype, tol] of [
    ["f64", 1e-10],
    ["f32", 1e-5],
  ] as const) {
    test(`loss, member counts and gradient equal the whole samples' (${dtype}, tolerance ${tol})`, async () => {
      using model = await tinyModel({ dtype, config: TINY_FULL, sharpen: 3 });
      const a = stepOf(model, whole);
      const b = stepOf(model, shared);
      expect(Math.abs(b.metrics.loss - a.metrics.loss)).toBeLessThan(tol * Math.max(1, Math.abs(a.metrics.loss)));
      for (const key of [
        "rlCount",
        "ceCount",
        "refKlCount",
        "mismatchKlCount",
        "entropyCount",
        "maskedLow",
        "maskedHigh",
      ] as const)
        expect(b.metrics[key]).toBe(a.metrics[key]);
      for (const key of ["rlSum", "ceSum", "refKlSum", "entropySum", "mismatchKlSum"] as const)
        expect(Math.abs(b.metrics[key] - a.metrics[key])).toBeLessThan(tol * Math.max(1, Math.abs(a.metrics[key])));
      expect(maxRelDiff(b.grads, a.grads)).toBeLessThan(tol);
      expect(Math.max(...[...a.grads.values()].map((g) => Math.max(...g.map(Math.abs))))).toBeGreaterThan(1e-4);
    });
  }

  test("long samples: a 300-token prefix and 300-token continuations (attention in blocks) give the whole samples' gradient", async () => {
    const long = [{ prompt: 300, samples: group(rng(23), 300, [300, 260]) }];
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 3 });
    const a = stepOf(model, pack(long[0]!.samples));
    const b = stepOf(model, shareRow(long, []));
    expect(Math.abs(b.metrics.loss - a.metrics.loss)).toBeLessThan(1e-10 * Math.max(1, Math.abs(a.metrics.loss)));
    expect(maxRelDiff(b.grads, a.grads)).toBeLessThan(1e-10);
  });

  test("all parents -1 is the plain row, bit for bit", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL });
    const a = stepOf(model, whole);
    const b = stepOf(model, { ...whole, sampleParents: new Int32Array(whole.sampleLengths.length).fill(-1) });
    expect(b.metrics.loss).toBe(a.metrics.loss);
    expect(maxRelDiff(b.grads, a.grads)).toBe(0);
  });

  test("a parent that is not an earlier sample, or is a continuation itself, is refused", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL });
    const bad = (parents: number[]) => () =>
      trainStep(model, { ...shared, sampleParents: Int32Array.from(parents) }, LOSS);
    const n = shared.sampleLengths.length;
    const later = Array.from({ length: n }, (_, i) => (i === 0 ? 1 : -1));
    expect(bad(later)).toThrow("sample_parents[0] = 1: a parent must be -1 or an earlier sample of the row");
    const nested = Array.from({ length: n }, (_, i) => (i === 1 ? 0 : i === 2 ? 1 : -1));
    expect(bad(nested)).toThrow("sample_parents[2] = 1: that sample continues another itself");
    expect(() => trainStep(model, { ...shared, sampleParents: new Int32Array(2) }, LOSS)).toThrow(
      `sampleParents has 2 entries but the row has ${n} samples`,
    );
  });
});

// Packing as properties over random steps (fast-check, bounded runs): any set of samples packs
// with every token exactly once (a sample longer than seq_len is truncated, never split), no row
// over seq_len, the component counts equal to a recount from the samples; and the loss and gradient of a step do
// not depend on how it was packed (rows of 1 sample vs first-fit rows), on the float64 unigram
// policy that implements the trainer's loss exactly (test/fixtures/rollouts.ts).
import { expect, test } from "bun:test";
import fc from "fast-check";
import { packStep } from "../../../src/data/pack.ts";
import type { TrainingSample } from "../../../src/data/types.ts";
import { trainStep } from "../../../src/trainer/step.ts";
import { DEFAULT_LOSS, UnigramPolicy } from "../../fixtures/rollouts.ts";

const VOCAB = 12;

/** A random training sample: tokens, an action suffix, and optionally each weight stream. */
const sampleArb = (index: number) =>
  fc
    .record({
      length: fc.integer({ min: 1, max: 40 }),
      prompt: fc.integer({ min: 0, max: 20 }),
      seed: fc.integer(),
      advantage: fc.double({ min: -2, max: 2, noNaN: true }),
      env: fc.constantFrom("math", "forth"),
      streams: fc.subarray(["rlWeights", "ceWeights", "refKlWeights"] as const),
    })
    .map(({ length, prompt, seed, advantage, env, streams }): TrainingSample => {
      let state = seed >>> 0;
      const rand = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
      const mask = Array.from({ length }, (_, i) => (i >= Math.min(prompt, length - 1) ? 1 : 0));
      const sample: TrainingSample = {
        tokenIds: Array.from({ length }, () => Math.floor(rand() * VOCAB)),
        lossMask: mask,
        advantages: mask.map((m) => m * advantage),
        inferenceLogprobs: mask.map((m) => (m ? -Math.log(VOCAB) + (rand() - 0.5) * 0.1 : 0)),
        temperatures: mask.map((m) => (m ? 0.8 : 1)),
        env,
        rolloutId: `s${index}`,
      };
      for (const stream of streams) sample[stream] = mask.map((m) => m * rand());
      if (streams.includes("refKlWeights")) sample.refLogprobs = sample.inferenceLogprobs.map((lp) => lp - 0.1);
      return sample;
    });
/** The step's member counts from the samples themselves: every token but each sample's first. */
function recount(samples: readonly TrainingSample[], seqLen: number) {
  const counts = { rl: 0, ce: 0, refKl: 0, distill: 0, rlSequences: 0 };
  for (const s of samples) {
    const rlBefore = counts.rl;
    for (let t = 1; t < Math.min(seqLen, s.tokenIds.length); t++) {
      if (s.lossMask[t] && (s.rlWeights?.[t] ?? 1) !== 0) counts.rl++;
      if ((s.ceWeights?.[t] ?? 0) !== 0) counts.ce++;
      if ((s.refKlWeights?.[t] ?? 0) !== 0) counts.refKl++;
      if ((s.distillWeights?.[t] ?? 0) !== 0) counts.distill++;
    }
    if (counts.rl > rlBefore) counts.rlSequences++;
  }
  return counts;
}

const stepArb = fc
  .integer({ min: 1, max: 12 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => sampleArb(i))));

test("every token of every sample lands in exactly one row, in order, truncated only past seq_len", () => {
  fc.assert(
    fc.property(stepArb, fc.integer({ min: 1, max: 64 }), (samples, seqLen) => {
      const step = packStep(samples, { seqLen });
      const seen = new Map<string, number[]>();
      for (const row of step.rows) {
        expect(row.tokenIds.length).toBeLessThanOrEqual(seqLen);
        expect([...row.sampleLengths].reduce((a, b) => a + b, 0)).toBe(row.tokenIds.length);
        for (const info of row.samples) {
          expect(seen.has(info.rolloutId)).toBe(false); // never split over rows
          seen.set(info.rolloutId, [...row.tokenIds.subarray(info.start, info.start + info.length)]);
        }
      }
      expect(seen.size).toBe(samples.length);
      for (const s of samples) expect(seen.get(s.rolloutId)).toEqual(s.tokenIds.slice(0, seqLen));
      expect(step.tokens).toBe(samples.reduce((n, s) => n + Math.min(seqLen, s.tokenIds.length), 0));
      expect(step.truncatedSamples).toBe(samples.filter((s) => s.tokenIds.length > seqLen).length);
      expect(step.counts).toEqual(recount(samples, seqLen));
    }),
    { numRuns: 150, seed: 25 },
  );
});

test("the step's loss and gradient do not depend on the packing", () => {
  fc.assert(
    fc.property(stepArb, fc.integer({ min: 40, max: 200 }), (samples, seqLen) => {
      const run = (rowLen: number) => {
        const policy = new UnigramPolicy(VOCAB, 3);
        const result = trainStep(policy, packStep(samples, { seqLen: rowLen }), {
          lr: 0.1,
          maxGradNorm: 0,
          loss: DEFAULT_LOSS,
        });
        return { loss: result.metrics.loss!, grad: policy.lastGrad };
      };
      // 40 fits the longest sample, so both packings hold the same tokens, just grouped differently
      const tight = run(40);
      const loose = run(seqLen);
      expect(Math.abs(tight.loss - loose.loss)).toBeLessThan(1e-9);
      tight.grad.forEach((g, i) => expect(Math.abs(g - loose.grad[i]!)).toBeLessThan(1e-9));
    }),
    { numRuns: 60, seed: 25 },
  );
});

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
          losses: [DEFAULT_LOSS],
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

/** Groups of samples that begin with the same prompt (0-40 tokens), as a step of GRPO groups. */
const groupedStepArb = fc
  .array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer(), stepArb), { minLength: 1, maxLength: 4 })
  .map((groups) =>
    groups.flatMap(([prompt, seed, samples], g) => {
      let state = seed >>> 0;
      const shared = Array.from(
        { length: prompt },
        () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) % VOCAB,
      );
      return samples.map((s) => {
        const pad = <T>(values: T[] | undefined, fill: T) => values && [...new Array<T>(prompt).fill(fill), ...values];
        return {
          ...s,
          rolloutId: `g${g}${s.rolloutId}`,
          tokenIds: [...shared, ...s.tokenIds],
          lossMask: pad(s.lossMask, 0)!,
          advantages: pad(s.advantages, 0)!,
          inferenceLogprobs: pad(s.inferenceLogprobs, 0)!,
          temperatures: pad(s.temperatures, 1)!,
          rlWeights: pad(s.rlWeights, 0),
          ceWeights: pad(s.ceWeights, 0),
          refKlWeights: pad(s.refKlWeights, 0),
          refLogprobs: pad(s.refLogprobs, 0),
        };
      });
    }),
  );

test("shared prefixes: each sample is its prefix then its own tokens, the step's counts and loss unchanged", () => {
  let sharedSamples = 0;
  fc.assert(
    fc.property(groupedStepArb, fc.integer({ min: 30, max: 300 }), (samples, seqLen) => {
      const shared = packStep(samples, { seqLen, sharePrefixes: true });
      const whole = packStep(samples, { seqLen });
      let prefixes = 0;
      for (const row of shared.rows) {
        expect(row.tokenIds.length).toBeLessThanOrEqual(seqLen);
        const parents = row.sampleParents ?? new Int32Array(row.sampleLengths.length).fill(-1);
        const starts = [...row.sampleLengths].map((_, i, n) => n.slice(0, i).reduce((a, b) => a + b, 0));
        for (const info of row.samples) {
          const segment = starts.indexOf(info.start);
          expect(row.sampleLengths[segment]).toBe(info.length);
          const own = [...row.tokenIds.subarray(info.start, info.start + info.length)];
          const s = samples.find((x) => x.rolloutId === info.rolloutId)!;
          if (!info.prefix) {
            expect(parents[segment]).toBe(-1);
            expect(own).toEqual(s.tokenIds.slice(0, seqLen));
            continue;
          }
          expect(starts[parents[segment]!]).toBe(info.prefix.start);
          expect(info.prefix.length).toBeGreaterThanOrEqual(16);
          const prefix = [...row.tokenIds.subarray(info.prefix.start, info.prefix.start + info.prefix.length)];
          expect([...prefix, ...own]).toEqual(s.tokenIds.slice(0, seqLen));
          expect(s.lossMask.slice(0, info.prefix.length + 1).every((m) => m === 0)).toBe(true);
          prefixes++;
        }
      }
      expect(shared.rows.flatMap((r) => r.samples).length).toBe(samples.length);
      expect(shared.counts).toEqual(whole.counts);
      expect(shared.tokens).toBe(shared.rows.reduce((n, r) => n + r.tokenIds.length, 0));
      if (prefixes) expect(shared.tokens).toBeLessThan(whole.tokens);
      expect(shared.sharedTokens).toBe(whole.tokens - shared.tokens);
      expect(whole.sharedTokens).toBe(0);
      sharedSamples += prefixes;
      const lossOf = (step: typeof shared) => {
        const policy = new UnigramPolicy(VOCAB, 3);
        const result = trainStep(policy, step, { lr: 0.1, maxGradNorm: 0, losses: [DEFAULT_LOSS] });
        return { loss: result.metrics.loss!, grad: policy.lastGrad };
      };
      const a = lossOf(shared);
      const b = lossOf(whole);
      expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-9);
      a.grad.forEach((g, i) => expect(Math.abs(g - b.grad[i]!)).toBeLessThan(1e-9));
    }),
    { numRuns: 100, seed: 7 },
  );
  expect(sharedSamples).toBeGreaterThan(100); // the property ran on shared rows, not only on whole samples
});

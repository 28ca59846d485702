// The shim's forward against the independent float64 reference (reference_model.ts), for each
// architecture variant, through both entry points that compute logprobs: scoring (float32 out)
// and the train step (its ce metric, float64).
import { expect, setDefaultTimeout, test } from "bun:test";
import type { ShimModelConfig } from "../../src/native/model.ts";
import { score } from "../../src/native/generate.ts";
import { trainStep } from "../../src/native/train.ts";
import { referenceLogprobs } from "./reference_model.ts";
import { pack, randomSample, readParams, rng, TINY, TINY_FULL, tinyModel } from "./tiny_model.ts";

// Each test is well under a second on an idle machine; a busy shared one can be 10-100x slower
// (bunfig.toml has no per-test timeout key: the default is 5 s).
setDefaultTimeout(60_000);

const VARIANTS: [string, ShimModelConfig][] = [
  ["llama (untied, no bias, no qk norm)", TINY],
  ["qwen3-style (q/k norm, attention bias)", TINY_FULL],
  ["tied embeddings, 1 kv head", { ...TINY_FULL, tie_word_embeddings: true, num_key_value_heads: 1, rope_theta: 1e6 }],
];

for (const [label, config] of VARIANTS) {
  test(`scoring logprobs equal the float64 reference: ${label}`, async () => {
    using model = await tinyModel({ dtype: "f64", config, sharpen: 20, seed: 3 });
    // Random norm weights and biases, so those parameters matter.
    const rand = rng(11);
    for (const p of model.params()) {
      if (p.name.endsWith("norm.weight") || p.name.endsWith(".bias")) {
        const n = p.shape.reduce((a, b) => a * b, 1);
        model.setParam(
          p.name,
          Float64Array.from({ length: n }, () => (p.name.endsWith("bias") ? 0.1 : 1) * (0.5 + rand())),
          "f64",
          p.shape,
        );
      }
    }
    const params = readParams(model);
    // Runs of equal lengths (7, 7 and 4, 4, 4) take the batched attention path.
    const seqs = [13, 7, 7, 1, 20, 4, 4, 4].map((n) =>
      Array.from({ length: n }, () => Math.floor(rand() * config.vocab_size)),
    );
    const temps = seqs.map((s, i) => Float32Array.from(s, () => [1, 0.7, 1.3, 0.5, 1, 1, 0.9, 1][i]!));
    const got = score(model, seqs, { temperature: temps });
    seqs.forEach((s, i) => {
      const want = referenceLogprobs(config, params, s, Array.from(temps[i]!));
      expect(got.logprobs[i]!.length).toBe(s.length);
      for (let t = 0; t < s.length; t++)
        expect(Math.abs(got.logprobs[i]![t]! - want[t]!)).toBeLessThan(5e-6 * Math.max(1, Math.abs(want[t]!)));
    });
    // The spread of logprobs shows the sharpened model is far from uniform (the comparison means something).
    const all = got.logprobs.flatMap((l) => Array.from(l.subarray(1)));
    expect(Math.max(...all) - Math.min(...all)).toBeGreaterThan(2);
  });
}

test("the train step's logprobs equal the reference in float64 (ce metric over every predicted token)", async () => {
  const config = TINY_FULL;
  using model = await tinyModel({ dtype: "f64", config, sharpen: 10, seed: 5 });
  const params = readParams(model);
  const rand = rng(3);
  const samples = [9, 5, 12].map((n) => ({ ...randomSample(rand, n, 2), temperature: 0.8 }));
  for (const s of samples) s.ceWeights = s.tokenIds.map(() => 1);
  const m = trainStep(model, pack(samples), { nRl: 1, nCe: 1, nRefKl: 1 });
  const want = samples.reduce(
    (sum, s) =>
      sum -
      referenceLogprobs(
        config,
        params,
        s.tokenIds,
        s.tokenIds.map(() => Math.fround(0.8)),
      ).reduce((a, b) => a + b, 0),
    0,
  );
  expect(m.all.ceCount).toBe(9 + 5 + 12 - 3); // the first token of each sample has no prediction
  expect(Math.abs(m.all.nllSum - want)).toBeLessThan(1e-10 * want);
});

test("a sample longer than one attention block (600 tokens: 3 blocks of queries) scores as the reference", async () => {
  const config = TINY_FULL;
  using model = await tinyModel({ dtype: "f64", config, sharpen: 10, seed: 7 });
  const params = readParams(model);
  const rand = rng(5);
  const seq = Array.from({ length: 600 }, () => Math.floor(rand() * config.vocab_size));
  const got = score(model, [seq]).logprobs[0]!;
  const want = referenceLogprobs(
    config,
    params,
    seq,
    seq.map(() => 1),
  );
  for (let t = 0; t < seq.length; t++)
    expect(Math.abs(got[t]! - want[t]!)).toBeLessThan(5e-6 * Math.max(1, Math.abs(want[t]!)));
});

// NativeGenerator.setModel (rlx_gen_set_model): rebinding a generator mid-generation keeps its KV
// cache and running sequences and samples every later token from the new weights.
//
// What is checkable exactly: after a swap, a token's distribution comes from the new weights
// attending over K/V the old weights wrote, which no single-model scoring call reproduces. So:
//   - identical weights (a second model from the same seed): the swap changes nothing at all;
//   - weights that differ only where no cached K/V depends on them (the last layer's MLP and the
//     output head): the cache is the same under both models, so tokens before the swap score
//     exactly under the old model and tokens after it exactly under the new one;
//   - weights that differ everywhere: the tokens after the swap match neither model's scoring
//     (the old K/V were kept, not recomputed), and the old model can be freed meanwhile;
//   - another architecture is refused naming the field, and the generator keeps working.
import { expect, setDefaultTimeout, test } from "bun:test";
import { NativeGenerator, score } from "../../src/native/generate.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { f64, rng, TINY_FULL, tinyModel } from "./tiny_model.ts";

setDefaultTimeout(60_000);

const V = TINY_FULL.vocab_size;
const rand = rng(11);
const PROMPTS = [5, 2].map((n) => Array.from({ length: n }, () => Math.floor(rand() * V)));
const NEW_TOKENS = 14;
const SWAP_AFTER = 5; // decode steps on the old model (plus the token the prefill samples)

interface Run {
  tokens: number[][];
  logprobs: number[][];
}

/** Generates PROMPTS on `first`; after SWAP_AFTER steps rebinds to `second` (when given) and finishes. */
function runWithSwap(first: NativeModel, second: NativeModel | null, afterSwap?: () => void): Run {
  using gen = NativeGenerator.create(first, { slots: PROMPTS.length, capacity: 32 });
  const run: Run = { tokens: PROMPTS.map(() => []), logprobs: PROMPTS.map(() => []) };
  const record = (produced: ReturnType<NativeGenerator["step"]>) => {
    for (const t of produced) (run.tokens[t.slot]!.push(t.token), run.logprobs[t.slot]!.push(t.logprob));
  };
  record(
    gen.add(
      PROMPTS.map((prompt, i) => ({ prompt, sampling: { temperature: 1, maxNewTokens: NEW_TOKENS, seed: 40 + i } })),
    ),
  );
  for (let s = 0; s < SWAP_AFTER; s++) record(gen.step());
  if (second) gen.setModel(second);
  afterSwap?.();
  for (let produced = gen.step(); produced.length > 0; produced = gen.step()) record(produced);
  run.tokens.forEach((t) => expect(t.length).toBe(NEW_TOKENS));
  return run;
}

/** Scoring logprobs of each generated token under `model`. */
function scored(model: NativeModel, run: Run): number[][] {
  const lps = score(
    model,
    PROMPTS.map((p, i) => [...p, ...run.tokens[i]!]),
  ).logprobs;
  return lps.map((lp, i) => Array.from(lp.subarray(PROMPTS[i]!.length)));
}

/** Adds noise to a parameter (float64 round trip). */
function perturb(model: NativeModel, name: string, scale: number, seed: number): void {
  const r = rng(seed);
  const w = f64(model.getParam(name, "f64")).map((x) => x + scale * (r() - 0.5));
  model.setParam(name, w, "f64", model.param(name).shape);
}

test("rebinding to identical weights changes no token and no logprob", async () => {
  using a = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  using same = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  const plain = runWithSwap(a, null);
  const swapped = runWithSwap(a, same);
  expect(swapped.tokens).toEqual(plain.tokens);
  expect(swapped.logprobs).toEqual(plain.logprobs);
});

test("weights that no cached K/V depends on: tokens before the swap score under the old model, after it under the new", async () => {
  using a = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  using b = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  const last = TINY_FULL.num_hidden_layers - 1;
  perturb(b, `model.layers.${last}.mlp.down_proj.weight`, 2, 1);
  perturb(b, "lm_head.weight", 4, 2);
  const run = runWithSwap(a, b);
  const [underA, underB] = [scored(a, run), scored(b, run)];
  const swapAt = SWAP_AFTER + 1; // tokens sampled before the swap: the prefill's and SWAP_AFTER steps'
  let changed = 0;
  run.logprobs.forEach((lps, i) =>
    lps.forEach((lp, j) => {
      const ref = j < swapAt ? underA[i]![j]! : underB[i]![j]!;
      expect(Math.abs(lp - ref)).toBeLessThan(1e-4);
      if (Math.abs(underA[i]![j]! - underB[i]![j]!) > 1e-2) changed += 1;
    }),
  );
  expect(changed).toBeGreaterThan(PROMPTS.length * 4); // the two models really disagree on these tokens
});

test("weights that differ everywhere: later tokens run the new weights over the old K/V; the old model can be freed", async () => {
  using a = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  using b = await tinyModel({ config: TINY_FULL, sharpen: 5, seed: 2 });
  using a2 = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  const run = runWithSwap(a2, b, () => a2.free());
  const [underA, underB] = [scored(a, run), scored(b, run)];
  const swapAt = SWAP_AFTER + 1;
  run.logprobs.forEach((lps, i) => {
    lps.slice(0, swapAt).forEach((lp, j) => expect(Math.abs(lp - underA[i]![j]!)).toBeLessThan(1e-4));
    // The first token after the swap attends over a whole prefix of old-model K/V: it is neither
    // model's prefill logprob (a generator that recomputed the cache under b would match underB).
    expect(Math.abs(lps[swapAt]! - underB[i]![swapAt]!)).toBeGreaterThan(1e-3);
    expect(Math.abs(lps[swapAt]! - underA[i]![swapAt]!)).toBeGreaterThan(1e-3);
  });
});

test("another architecture is refused naming the field; the generator keeps its model", async () => {
  using a = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  using moreKvHeads = await tinyModel({ config: { ...TINY_FULL, num_key_value_heads: 4 } });
  using otherVocab = await tinyModel({ config: { ...TINY_FULL, vocab_size: V + 1 } });
  using f64Model = await tinyModel({ config: TINY_FULL, dtype: "f64" });
  using gen = NativeGenerator.create(a, { slots: 1, capacity: 16 });
  const first = gen.add([{ prompt: PROMPTS[0]!, sampling: { temperature: 0, maxNewTokens: 4 } }]);
  expect(() => gen.setModel(moreKvHeads)).toThrow(/num_key_value_heads = 4.*has 2/);
  expect(() => gen.setModel(otherVocab)).toThrow(/vocab_size/);
  expect(() => gen.setModel(f64Model)).toThrow(/dtype/);
  const rest = [gen.step(), gen.step(), gen.step()].flat();
  const tokens = [...first, ...rest].map((t) => t.token);
  const ref = score(a, [[...PROMPTS[0]!, ...tokens]]).logprobs[0]!.subarray(PROMPTS[0]!.length);
  [...first, ...rest].forEach((t, j) => expect(Math.abs(t.logprob - ref[j]!)).toBeLessThan(1e-4));
  expect(rest[2]!.finish).toBe("length");
});

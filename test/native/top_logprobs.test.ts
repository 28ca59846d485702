// Top-N of the tempered distribution, computed in the shim: rlx_score_top's logprobs are
// bit-identical to rlx_score's, its top-k and ranks equal the whole distribution sorted on the
// host, and the generator's top-k of each sampled step is the distribution scoring gives for the
// same prefix at the same temperature, with the sampled token's reported logprob among them.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { generate, NativeGenerator, score } from "../../src/native/generate.ts";
import { scoreTop } from "../../src/native/score_top.ts";
import { rng, TINY, TINY_FULL, tinyModel } from "./tiny_model.ts";

setDefaultTimeout(60_000);

const V = TINY.vocab_size;
const rand = rng(11);
const SEQS = [6, 2, 9].map((n) => Array.from({ length: n }, () => Math.floor(rand() * V)));

/** The whole next-token distribution after `prefix`, by scoring every continuation. */
function distribution(model: Parameters<typeof score>[0], prefix: number[], temperature: number): number[] {
  const seqs = Array.from({ length: V }, (_, v) => [...prefix, v]);
  return score(model, seqs, { temperature, rowTokens: 0 }).logprobs.map((lp) => lp[prefix.length]!);
}

describe("rlx_score_top", () => {
  test("logprobs are bit-identical to rlx_score's, at any row budget and temperature", async () => {
    using model = await tinyModel({ config: TINY_FULL, sharpen: 5 });
    for (const [temperature, rowTokens] of [
      [1, 4096],
      [0.7, 4],
      [1.3, 0],
    ] as const) {
      const plain = score(model, SEQS, { temperature, rowTokens }).logprobs;
      const top = scoreTop(model, SEQS, { k: 5, temperature, rowTokens });
      SEQS.forEach((_, i) => expect(Array.from(top[i]!.logprobs)).toEqual(Array.from(plain[i]!)));
    }
  });

  test("the top-k and the ranks are the whole distribution sorted (k = 1, 7, the vocabulary)", async () => {
    using model = await tinyModel({ config: TINY_FULL, sharpen: 5 });
    const seq = SEQS[2]!;
    for (const k of [1, 7, V]) {
      const [scored] = scoreTop(model, [seq], { k, temperature: 0.8 });
      expect(scored!.top[0]).toBeNull();
      for (const t of [1, 4, 8]) {
        const full = distribution(model, seq.slice(0, t), 0.8);
        const order = full.map((lp, id) => ({ lp, id })).sort((a, b) => b.lp - a.lp);
        const top = scored!.top[t]!;
        expect(top.ids.length).toBe(k);
        top.logprobs.forEach((lp, j) => expect(Math.abs(lp - order[j]!.lp)).toBeLessThan(1e-5));
        // Ids agree wherever the sorted values are not (near-)tied.
        top.ids.forEach((id, j) => expect(Math.abs(full[id]! - order[j]!.lp)).toBeLessThan(1e-5));
        expect(top.rank).toBe(full.filter((lp) => lp >= full[seq[t]!]! - 1e-7).length);
      }
    }
  });

  test("k outside 0..vocabulary is an error naming k", async () => {
    using model = await tinyModel({ config: TINY_FULL });
    expect(() => scoreTop(model, SEQS, { k: V + 1 })).toThrow(
      new RegExp(`k = ${V + 1} must be in 0..vocab_size \\(${V}\\)`),
    );
    const [only] = scoreTop(model, [SEQS[0]!], { k: 0 });
    expect(only!.top[1]!.ids).toEqual([]);
    expect(only!.top[1]!.rank).toBeGreaterThanOrEqual(1);
  });
});

describe("the generator's top-k", () => {
  test("each step's top-k is scoring's at the same temperature; the sampled token's logprob is among them", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL, sharpen: 5 });
    for (const temperature of [0.7, 0]) {
      using gen = NativeGenerator.create(model, { slots: 2, capacity: 32 });
      const prompts = [SEQS[0]!, SEQS[2]!];
      const tokens: number[][] = [[], []];
      const tops: ReturnType<NativeGenerator["topLogprobs"]>[] = [[], []];
      const record = (produced: ReturnType<NativeGenerator["step"]>) => {
        const top = gen.topLogprobs(produced.length, 5);
        produced.forEach((t, j) => {
          tokens[t.slot]!.push(t.token);
          tops[t.slot]!.push(top[j]!);
          const at = top[j]!.ids.indexOf(t.token);
          if (at >= 0) expect(top[j]!.logprobs[at]).toBe(t.logprob); // exactly the reported logprob
          expect(at < 0 ? top[j]!.rank > 5 : top[j]!.rank === at + 1).toBe(true);
        });
      };
      record(gen.add(prompts.map((prompt, i) => ({ prompt, sampling: { temperature, maxNewTokens: 6, seed: i } }))));
      for (let s = 0; s < 5; s++) record(gen.step());
      const scored = scoreTop(
        model,
        prompts.map((p, i) => [...p, ...tokens[i]!]),
        { k: 5, temperature: temperature || 1 },
      );
      prompts.forEach((p, i) =>
        tokens[i]!.forEach((_, j) => {
          const want = scored[i]!.top[p.length + j]!;
          expect(tops[i]![j]!.ids).toEqual(want.ids);
          tops[i]![j]!.logprobs.forEach((lp, r) => expect(Math.abs(lp - want.logprobs[r]!)).toBeLessThan(1e-4));
          expect(tops[i]![j]!.rank).toBe(want.rank);
        }),
      );
      if (temperature === 0) tops.flat().forEach((t, j) => expect(t.rank).toBe(1)); // greedy takes the argmax
    }
  });

  test("n must be the count the last call reported; k in 0..vocabulary", async () => {
    using model = await tinyModel({ config: TINY_FULL });
    using gen = NativeGenerator.create(model, { slots: 2, capacity: 8 });
    expect(() => gen.topLogprobs(1, 3)).toThrow(/the last rlx_gen_add or rlx_gen_step reported 0 tokens/);
    gen.add([{ prompt: [1, 2], sampling: { maxNewTokens: 4, seed: 1 } }]);
    expect(() => gen.topLogprobs(2, 3)).toThrow(/n = 2, but the last rlx_gen_add or rlx_gen_step reported 1/);
    expect(() => gen.topLogprobs(1, V + 1)).toThrow(new RegExp(`k = ${V + 1} must be in 0..vocab_size`));
    expect(gen.topLogprobs(1, 3)[0]!.ids.length).toBe(3);
    expect(generate(model, [[1]], { maxNewTokens: 2, seed: 1 })[0]!.tokens.length).toBe(2);
  });
});

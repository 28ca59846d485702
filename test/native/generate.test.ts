// Generation against scoring: the logprobs a generator reports equal prefill logprobs of the same
// sequence (what the trainer compares against), greedy picks the argmax, top-k/top-p only sample
// from their allowed sets, seeds reproduce, stop tokens and capacity end sequences, and continuous
// batching (fewer slots than prompts) and repeated prompts (prefilled once) give the same
// completions as one batch of prompts added alone.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { generate, NativeGenerator, score, type SamplingParams } from "../../src/native/generate.ts";
import type { ShimModelConfig } from "../../src/native/model.ts";
import { readParams, rng, TINY, TINY_FULL, tinyModel } from "./tiny_model.ts";

// Each test is well under a second on an idle machine; a busy shared one can be 10-100x slower
// (bunfig.toml has no per-test timeout key: the default is 5 s).
setDefaultTimeout(60_000);

const V = TINY.vocab_size;
const rand = rng(5);
const PROMPTS = [3, 9, 1, 5].map((n) => Array.from({ length: n }, () => Math.floor(rand() * V)));

/** Logprobs of every candidate next token after `prefix` at `temperature`, by scoring. */
function nextTokenLogprobs(model: Parameters<typeof score>[0], prefix: number[], temperature = 1): number[] {
  const seqs = Array.from({ length: V }, (_, v) => [...prefix, v]);
  return score(model, seqs, { temperature, rowTokens: 0 }).logprobs.map((lp) => lp[prefix.length]!);
}

describe("generation logprobs equal scoring logprobs of the same sequence", () => {
  for (const [label, sampling] of [
    ["temperature 1", { temperature: 1, maxNewTokens: 12 }],
    ["temperature 0.7", { temperature: 0.7, maxNewTokens: 12 }],
    [
      "temperature 0.7 with top-p 0.9 and top-k 10 (full-distribution logprobs)",
      { temperature: 0.7, topP: 0.9, topK: 10, maxNewTokens: 12 },
    ],
    ["greedy (temperature-1 logprobs)", { temperature: 0, maxNewTokens: 12 }],
  ] as [string, SamplingParams][]) {
    test(label, async () => {
      using model = await tinyModel({ dtype: "f32", config: TINY_FULL, sharpen: 5 });
      const out = generate(
        model,
        PROMPTS,
        PROMPTS.map((_, i) => ({ ...sampling, seed: 100 + i })),
      );
      const scoringTemperature = sampling.temperature || 1;
      const scored = score(
        model,
        PROMPTS.map((p, i) => [...p, ...out[i]!.tokens]),
        { temperature: scoringTemperature },
      ).logprobs;
      let kl = 0;
      let n = 0;
      out.forEach((c, i) => {
        expect(c.tokens.length).toBe(12);
        expect(c.finish).toBe("length");
        c.logprobs.forEach((glp, j) => {
          const d = scored[i]![PROMPTS[i]!.length + j]! - glp;
          kl += Math.exp(d) - d - 1;
          n += 1;
          expect(Math.abs(d)).toBeLessThan(1e-4);
        });
      });
      expect(kl / n).toBeLessThan(1e-6);
    });
  }
});

// Equal-length prompts prefill as one batched run; decode rows at one position or at several.
for (const [label, prompts] of [
  ["runs of equal-length prompts", [PROMPTS[0]!, PROMPTS[0]!, PROMPTS[0]!, PROMPTS[3]!, [7, 7, 7, 7, 7]]],
  ["all prompts the same length (every decode row at one position)", [PROMPTS[0]!, PROMPTS[0]!, [5, 6, 7]]],
] as [string, number[][]][]) {
  test(`generation matches scoring: ${label}`, async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL, sharpen: 5 });
    const out = generate(
      model,
      prompts,
      prompts.map((_, i) => ({ temperature: 0.8, maxNewTokens: 6, seed: i })),
    );
    const scored = score(
      model,
      prompts.map((p, i) => [...p, ...out[i]!.tokens]),
      { temperature: 0.8 },
    ).logprobs;
    out.forEach((c, i) =>
      c.logprobs.forEach((glp, j) => expect(Math.abs(scored[i]![prompts[i]!.length + j]! - glp)).toBeLessThan(1e-4)),
    );
    expect(out[0]!.tokens).not.toEqual(out[1]!.tokens); // seeds differ, prompts equal
  });
}

test("under bf16 autocast generation and scoring round differently but stay close (mismatch_kl < 1e-4)", async () => {
  using model = await tinyModel({ dtype: "f32", config: TINY_FULL, sharpen: 5 });
  model.setOption("autocast_bf16", true);
  const out = generate(model, PROMPTS, { temperature: 1, maxNewTokens: 12, seed: 9 });
  const scored = score(
    model,
    PROMPTS.map((p, i) => [...p, ...out[i]!.tokens]),
  ).logprobs;
  const d = out.flatMap((c, i) => c.logprobs.map((glp, j) => scored[i]![PROMPTS[i]!.length + j]! - glp));
  const kl = d.reduce((s, x) => s + Math.exp(x) - x - 1, 0) / d.length;
  expect(kl).toBeLessThan(1e-4);
  expect(kl).toBeGreaterThan(1e-9); // bf16 really ran: float32 stays below 1e-12 here
});

// On the CPU a decode step's attention is native/src/attention_cpu.cpp's loops; the
// fused_attention option off computes it as matmul and softmax instead. Head sizes 8, 12 and 20
// cover whole and partial groups of eight; 40 and 72 the kernel's blocks of 8 vectors of sums (32
// float64 or 64 float32 elements) and a tail past them; prompts of different lengths put rows at
// different positions and leave 0-3 keys past the groups of four scored together, and 30 new
// tokens take each row across two or three K/V blocks (native/src/kv_cache.h).
test("the CPU decode attention equals matmul + softmax (head_dim 8, 12, 20, 40, 72; 1-3 heads per kv head)", async () => {
  const cases: [dtype: "f64" | "f32", config: ShimModelConfig][] = [
    ["f64", TINY_FULL],
    ["f64", { ...TINY_FULL, num_attention_heads: 6, num_key_value_heads: 2, head_dim: 12 }],
    ["f64", { ...TINY, num_attention_heads: 3, num_key_value_heads: 3, head_dim: 20 }],
    ["f64", { ...TINY, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 40 }],
    ["f64", { ...TINY, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 72 }],
    ["f32", { ...TINY, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 72 }],
  ];
  for (const [dtype, config] of cases) {
    using model = await tinyModel({ dtype, config, sharpen: 2 });
    const sampling = PROMPTS.map((_, i) => ({ temperature: 1, maxNewTokens: 30, seed: 7 + i }));
    const kernel = generate(model, PROMPTS, sampling);
    model.setOption("fused_attention", false);
    const plain = generate(model, PROMPTS, sampling);
    kernel.forEach((c, i) => {
      expect(c.tokens).toEqual(plain[i]!.tokens);
      // the generator reports float32 logprobs: float64 inside may differ in their last bit
      const tolerance = dtype === "f64" ? 1e-6 : 1e-5;
      c.logprobs.forEach((lp, j) => expect(Math.abs(lp - plain[i]!.logprobs[j]!)).toBeLessThan(tolerance));
    });
  }
});

test("few-row float32 products through rlx's kernel (cpu_linear) equal BLAS's and float64 scoring", async () => {
  // Widths off the kernel's blocks: K = 20 and 27 leave a tail of 4 and 3 after groups of eight;
  // N = 67, 54 and 40 leave 3, 2 and 0 rows after blocks of four; 5 prompts are a block of three
  // rows and a remainder of two.
  const config = {
    ...TINY_FULL,
    hidden_size: 20,
    num_attention_heads: 2,
    num_key_value_heads: 1,
    head_dim: 10,
    intermediate_size: 27,
    vocab_size: 67,
  };
  using exact = await tinyModel({ dtype: "f64", config, sharpen: 3 });
  using fast = await tinyModel({ dtype: "f32", config });
  for (const [name, values] of readParams(exact)) fast.setParam(name, values, "f64", fast.param(name).shape);
  const prompts = [...PROMPTS, [2, 4]];
  const sampling = prompts.map((_, i) => ({ temperature: 1, maxNewTokens: 10, seed: 11 + i }));
  const kernel = generate(fast, prompts, sampling);
  fast.setOption("cpu_linear", false);
  const blas = generate(fast, prompts, sampling);
  const scored = score(
    exact,
    prompts.map((p, i) => [...p, ...kernel[i]!.tokens]),
    { temperature: 1 },
  ).logprobs;
  kernel.forEach((c, i) => {
    expect(c.tokens).toEqual(blas[i]!.tokens);
    c.logprobs.forEach((lp, j) => {
      expect(Math.abs(lp - blas[i]!.logprobs[j]!)).toBeLessThan(1e-5);
      expect(Math.abs(lp - scored[i]![prompts[i]!.length + j]!)).toBeLessThan(1e-5);
    });
  });
});

test("seeded generation is reproducible and the seed matters", async () => {
  using model = await tinyModel({ config: TINY_FULL, sharpen: 2 });
  const sampling = { temperature: 1, maxNewTokens: 16, seed: 7 };
  const a = generate(model, PROMPTS, sampling);
  const b = generate(model, PROMPTS, sampling);
  expect(b).toEqual(a);
  const c = generate(model, PROMPTS, { ...sampling, seed: 8 });
  expect(c.map((x) => x.tokens)).not.toEqual(a.map((x) => x.tokens));
});

test("greedy decoding picks the argmax of the scoring distribution at every step", async () => {
  using model = await tinyModel({ config: TINY_FULL, sharpen: 5 });
  const [greedy] = generate(model, [PROMPTS[1]!], { temperature: 0, maxNewTokens: 5 });
  const seq = [...PROMPTS[1]!];
  for (const token of greedy!.tokens) {
    const lps = nextTokenLogprobs(model, seq);
    expect(token).toBe(lps.indexOf(Math.max(...lps)));
    seq.push(token);
  }
  // Truncation to one candidate is greedy too.
  expect(generate(model, [PROMPTS[1]!], { temperature: 1, topK: 1, maxNewTokens: 5, seed: 3 })[0]!.tokens).toEqual(
    greedy!.tokens,
  );
  expect(generate(model, [PROMPTS[1]!], { temperature: 1, topP: 1e-6, maxNewTokens: 5, seed: 3 })[0]!.tokens).toEqual(
    greedy!.tokens,
  );
});

test("top-k and top-p only sample from their allowed sets", async () => {
  using model = await tinyModel({ config: TINY_FULL, sharpen: 3 });
  const prompt = PROMPTS[0]!;
  const probs = nextTokenLogprobs(model, prompt, 0.8).map(Math.exp);
  const order = probs
    .map((p, v) => [p, v] as const)
    .sort((x, y) => y[0] - x[0])
    .map(([, v]) => v);
  const topK = new Set(order.slice(0, 4));
  const nucleus = new Set<number>();
  let mass = 0;
  for (const v of order) {
    if (mass >= 0.6) break;
    (nucleus.add(v), (mass += probs[v]!));
  }
  expect(nucleus.size).toBeGreaterThan(1);
  const firstTokens = (s: Omit<SamplingParams, "maxNewTokens">) =>
    generate(
      model,
      new Array(48).fill(prompt),
      Array.from({ length: 48 }, (_, i) => ({ ...s, maxNewTokens: 1, seed: i })),
    ).map((c) => c.tokens[0]!);
  const k = firstTokens({ temperature: 0.8, topK: 4 });
  expect(k.every((t) => topK.has(t))).toBe(true);
  expect(new Set(k).size).toBeGreaterThan(1);
  const p = firstTokens({ temperature: 0.8, topP: 0.6 });
  expect(p.every((t) => nucleus.has(t))).toBe(true);
  expect(new Set(p).size).toBeGreaterThan(1);
});

test("a stop token ends the sequence with finish 'stop' and is returned as its last token", async () => {
  using model = await tinyModel({ config: TINY_FULL, sharpen: 2 });
  const sampling = { temperature: 1, maxNewTokens: 10, seed: 4 };
  const [free] = generate(model, [PROMPTS[2]!], sampling);
  const stop = free!.tokens[3]!;
  const [stopped] = generate(model, [PROMPTS[2]!], { ...sampling, stopTokenIds: [V - 1, stop] });
  const end = free!.tokens.indexOf(stop);
  expect(stopped!.tokens).toEqual(free!.tokens.slice(0, end + 1));
  expect(stopped!.finish).toBe("stop");
});

test("continuous batching (2 slots for 5 prompts) gives the same completions as one batch", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const prompts = [...PROMPTS, [1, 2, 3, 4, 5, 6, 7]];
  const sampling = prompts.map((_, i) => ({ temperature: 0.9, maxNewTokens: 3 + 2 * i, seed: i }));
  const together = generate(model, prompts, sampling);
  const trickled = generate(model, prompts, sampling, { slots: 2 });
  expect(trickled.map((c) => c.tokens)).toEqual(together.map((c) => c.tokens));
  trickled.forEach((c, i) =>
    c.logprobs.forEach((lp, j) => expect(Math.abs(lp - together[i]!.logprobs[j]!)).toBeLessThan(1e-6)),
  );
  expect(together.map((c) => c.tokens.length)).toEqual([3, 5, 7, 9, 11]);
});

test("a prompt repeated in one add (a group) is prefilled once and decodes as if added alone", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  // Two groups interleaved with a one-off prompt, and a prefix of a group's prompt (not a repeat).
  const prompts = [
    PROMPTS[3]!,
    PROMPTS[1]!,
    PROMPTS[3]!,
    PROMPTS[3]!.slice(0, 4),
    PROMPTS[1]!,
    PROMPTS[3]!,
    PROMPTS[2]!,
  ];
  const sampling = prompts.map((_, i) => ({ temperature: 1, maxNewTokens: 8, seed: 100 + i }));
  const grouped = generate(model, prompts, sampling);
  const alone = generate(model, prompts, sampling, { slots: 1 });
  expect(grouped.map((c) => c.tokens)).toEqual(alone.map((c) => c.tokens));
  grouped.forEach((c, i) =>
    c.logprobs.forEach((lp, j) => expect(Math.abs(lp - alone[i]!.logprobs[j]!)).toBeLessThan(1e-9)),
  );
  // Each member of a group samples from its own seed.
  expect(new Set([0, 2, 5].map((i) => grouped[i]!.tokens.join(","))).size).toBeGreaterThan(1);
});

test("the generator API: slots, capacity, cancel", async () => {
  using model = await tinyModel({ config: TINY_FULL });
  using gen = NativeGenerator.create(model, { slots: 3, capacity: 6 });
  expect(gen.freeSlots()).toBe(3);
  expect(gen.step()).toEqual([]);
  const first = gen.add([
    { prompt: [1, 2, 3, 4, 5], sampling: { maxNewTokens: 4, seed: 1 } }, // 5 + 1 generated = capacity
    { prompt: [7, 8], sampling: { maxNewTokens: 100, seed: 2 } },
  ]);
  expect(first.map((t) => t.slot)).toEqual([0, 1]);
  expect(first[0]!.finish).toBe("length");
  expect(first[1]!.finish).toBeNull();
  expect(gen.freeSlots()).toBe(2);
  const steps = [gen.step(), gen.step(), gen.step()];
  expect(steps.map((s) => s.length)).toEqual([1, 1, 1]);
  expect(steps[2]![0]!.finish).toBe("length"); // 2 prompt + 4 generated = capacity 6
  expect(gen.freeSlots()).toBe(3);
  const [t] = gen.add([{ prompt: [9], sampling: { maxNewTokens: 50, seed: 3 } }]);
  gen.remove(t!.slot);
  expect(gen.freeSlots()).toBe(3);
  expect(() => gen.remove(t!.slot)).toThrow(/holds no running sequence/);
  expect(() => gen.add([{ prompt: [1, 2, 3, 4, 5, 6], sampling: { maxNewTokens: 1 } }])).toThrow(
    /prompt length 6 must be in 1..5/,
  );
  expect(() => gen.add([{ prompt: [1], sampling: { maxNewTokens: 1, topP: 0 } }])).toThrow(/top_p/);
  expect(() => gen.add(new Array(4).fill({ prompt: [1], sampling: { maxNewTokens: 1 } }))).toThrow(
    /3 free slots, 4 sequences/,
  );
});

test("scoring: row budgets do not change the numbers; entropy is that of the tempered distribution", async () => {
  using model = await tinyModel({ config: TINY_FULL, sharpen: 8 });
  const one = score(model, PROMPTS, { rowTokens: 0, entropy: true, temperature: 0.9 });
  const many = score(model, PROMPTS, { rowTokens: 4, entropy: true, temperature: 0.9 });
  PROMPTS.forEach((p, i) => {
    expect(one.logprobs[i]![0]).toBe(0);
    for (let t = 0; t < p.length; t++)
      expect(Math.abs(one.logprobs[i]![t]! - many.logprobs[i]![t]!)).toBeLessThan(1e-5);
  });
  const prefix = PROMPTS[1]!.slice(0, 4);
  const probs = nextTokenLogprobs(model, prefix, 0.9).map(Math.exp);
  const entropy = -probs.reduce((s, p) => s + p * Math.log(p), 0);
  expect(probs.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
  expect(one.entropy![1]![4]).toBeCloseTo(entropy, 4);
  expect(entropy).toBeLessThan(Math.log(V) - 0.1);
});

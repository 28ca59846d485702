// LoRA in the shim (native/src/lora.cpp): the trainable parameter count, frozen base weights byte
// for byte through training, the adapters' gradients against central finite differences in
// float64, the adapted forward against an independent float64 computation of W + (alpha/r) B A,
// the merged weights, dropout only in train steps, and the errors.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { score } from "../../src/native/generate.ts";
import { LORA_TARGETS } from "../../src/model/config.ts";
import type { LoraSpec, NativeModel } from "../../src/native/model.ts";
import { NativeOptimizer, trainStep } from "../../src/native/train.ts";
import { f64, pack, randomSample, rng, TINY, TINY_FULL, tinyModel } from "./tiny_model.ts";

setDefaultTimeout(120_000);

const ALL: LoraSpec = { rank: 4, alpha: 8, dropout: 0, targets: LORA_TARGETS };

/** Sets every adapter tensor (B included) to small random values, so the adapters change the model. */
function randomizeAdapters(model: NativeModel, seed: number, scale = 0.05): void {
  const rand = rng(seed);
  for (const p of model.loraParams()) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    model.setParam(
      p.name,
      Float64Array.from({ length: n }, () => (rand() * 2 - 1) * scale),
      "f64",
      p.shape,
    );
  }
}

function rows(seed: number) {
  const rand = rng(seed);
  return [
    pack([
      { ...randomSample(rand, 9, 3), temperature: 1 },
      { ...randomSample(rand, 7, 2), temperature: 0.8 },
    ]),
  ];
}

test("the trainable parameter count is the sum of r x (d_in + d_out) over the targets", async () => {
  using model = await tinyModel({ config: TINY_FULL });
  model.addLora(ALL);
  const c = TINY_FULL;
  const [d, q, kv, ff] = [
    c.hidden_size,
    c.num_attention_heads * c.head_dim,
    c.num_key_value_heads * c.head_dim,
    c.intermediate_size,
  ];
  const dims = [
    [d, q],
    [d, kv],
    [d, kv],
    [q, d],
    [d, ff],
    [d, ff],
    [ff, d],
  ];
  const expected = c.num_hidden_layers * dims.reduce((sum, [din, dout]) => sum + ALL.rank * (din! + dout!), 0);
  const counted = model.loraParams().reduce((sum, p) => sum + p.shape.reduce((a, b) => a * b, 1), 0);
  expect(counted).toBe(expected);
  // the optimizer's state covers exactly those: 32 header bytes, then per tensor 8 + 2 x 4 x numel
  using optimizer = NativeOptimizer.create(model);
  expect(optimizer.saveState().byteLength).toBe(32 + model.loraParams().length * 8 + 8 * expected);
  // PEFT's saved names and shapes: A [r, d_in], B [d_out, r]
  expect(model.loraParams().slice(0, 2)).toEqual([
    { name: "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", shape: [4, d] },
    { name: "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", shape: [q, 4] },
  ]);
  expect(model.loraParams().at(-1)!.name).toBe("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
});

test("a fresh adapter leaves the model's logprobs unchanged (B = 0), a trained one changes them", async () => {
  using model = await tinyModel({ sharpen: 4 });
  const seqs = [[1, 5, 9, 2, 7, 3]];
  const before = score(model, seqs).logprobs[0]!;
  model.addLora({ ...ALL, targets: ["q_proj", "v_proj"] }, 3);
  expect([...score(model, seqs).logprobs[0]!]).toEqual([...before]);
  randomizeAdapters(model, 4);
  expect(Math.max(...score(model, seqs).logprobs[0]!.map((x, i) => Math.abs(x - before[i]!)))).toBeGreaterThan(1e-4);
});

test("base weights are byte-identical after 10 optimizer steps; the adapters moved", async () => {
  using model = await tinyModel({ dtype: "bf16", config: TINY_FULL, sharpen: 4 });
  model.addLora({ ...ALL, dropout: 0.1 });
  const base = new Map(model.params().map((p) => [p.name, model.getParam(p.name)]));
  const adapters = new Map(model.loraParams().map((p) => [p.name, model.getParam(p.name, "f32")]));
  using optimizer = NativeOptimizer.create(model, { weightDecay: 0.1 });
  const [row] = rows(7);
  for (let step = 0; step < 10; step++) {
    trainStep(model, row!, { nRl: 11, nCe: 1, nRefKl: 1 });
    expect(optimizer.step(1e-2).skipped).toBe(false);
  }
  for (const [name, bytes] of base)
    expect(Buffer.compare(Buffer.from(model.getParam(name)), Buffer.from(bytes))).toBe(0);
  let moved = 0;
  for (const [name, bytes] of adapters)
    if (Buffer.compare(Buffer.from(model.getParam(name, "f32")), Buffer.from(bytes)) !== 0) moved++;
  expect(moved).toBe(adapters.size);
  // the base parameters never get a gradient
  trainStep(model, row!, { nRl: 11, nCe: 1, nRefKl: 1 });
  for (const p of model.params()) expect(f64(model.getGrad(p.name, "f64")).every((x) => x === 0)).toBe(true);
});

describe("adapter gradients against central finite differences (float64)", () => {
  for (const config of [TINY, { ...TINY_FULL, tie_word_embeddings: true }]) {
    test(`every adapter tensor at three coordinates (${config === TINY ? "plain" : "bias, q/k norm, tied"})`, async () => {
      using model = await tinyModel({ dtype: "f64", config, sharpen: 6, seed: 5 });
      model.addLora({ rank: 3, alpha: 5, dropout: 0, targets: LORA_TARGETS }, 9);
      randomizeAdapters(model, 11, 0.2);
      const rand = rng(12);
      const samples = [
        { ...randomSample(rand, 9, 3), temperature: 1 },
        { ...randomSample(rand, 6, 2), temperature: 0.7 },
      ];
      // inference logprobs near the model's own, so no token sits at a trust-region mask boundary
      const lps = score(
        model,
        samples.map((s) => s.tokenIds),
        { temperature: samples.map((s) => new Float32Array(s.tokenIds.length).fill(s.temperature)) },
      ).logprobs;
      samples.forEach((s, i) => (s.inferenceLogprobs = [...lps[i]!].map((x) => x - 0.01)));
      samples[1]!.ceWeights = samples[1]!.tokenIds.map(() => 0.5);
      const row = pack(samples);
      const settings = { nRl: 10, nCe: 5, nRefKl: 1 };
      const lossOf = () => {
        const loss = trainStep(model, row, settings).all.loss;
        model.zeroGrad();
        return loss;
      };
      trainStep(model, row, settings);
      const grads = new Map(model.loraParams().map((p) => [p.name, f64(model.getGrad(p.name, "f64"))]));
      model.zeroGrad();
      const h = 1e-6;
      let largest = 0;
      for (const p of model.loraParams()) {
        const values = f64(model.getParam(p.name, "f64"));
        for (let k = 0; k < 3; k++) {
          const i = Math.floor(rand() * values.length);
          const original = values[i]!;
          values[i] = original + h;
          model.setParam(p.name, values, "f64", p.shape);
          const up = lossOf();
          values[i] = original - h;
          model.setParam(p.name, values, "f64", p.shape);
          const down = lossOf();
          values[i] = original;
          model.setParam(p.name, values, "f64", p.shape);
          const fd = (up - down) / (2 * h);
          const g = grads.get(p.name)![i]!;
          expect(Math.abs(fd - g)).toBeLessThan(1e-8 + 1e-6 * Math.abs(fd));
          largest = Math.max(largest, Math.abs(g));
        }
      }
      expect(largest).toBeGreaterThan(1e-3); // the check saw real gradients, not zeros
    });
  }
});

test("the adapted model equals a plain model holding the merged weights W + (alpha/r) B A (float64)", async () => {
  using adapted = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 4, seed: 3 });
  adapted.addLora({ rank: 2, alpha: 3, dropout: 0.5, targets: ["k_proj", "o_proj", "up_proj", "down_proj"] });
  randomizeAdapters(adapted, 21, 0.3);
  using merged = await tinyModel({ dtype: "f64", config: TINY_FULL, seed: 3 });
  for (const p of adapted.params()) {
    // the merge computed here, independently of the shim's: W + (alpha / r) B A in float64
    const w = f64(adapted.getParam(p.name, "f64"));
    const prefix = `base_model.model.${p.name.replace(/\.weight$/, "")}`;
    const A = adapted.loraParams().find((q) => q.name === `${prefix}.lora_A.weight`);
    if (A) {
      const a = f64(adapted.getParam(A.name, "f64"));
      const b = f64(adapted.getParam(`${prefix}.lora_B.weight`, "f64"));
      const [r, dIn] = A.shape as [number, number];
      const dOut = p.shape[0]!;
      for (let o = 0; o < dOut; o++)
        for (let i = 0; i < dIn; i++) {
          let sum = 0;
          for (let j = 0; j < r; j++) sum += b[o * r + j]! * a[j * dIn + i]!;
          w[o * dIn + i]! += (3 / 2) * sum;
        }
      expect(Math.max(...f64(adapted.getMergedParam(p.name, "f64")).map((x, i) => Math.abs(x - w[i]!)))).toBeLessThan(
        1e-14,
      );
    } else {
      expect(adapted.getMergedParam(p.name, "f64")).toEqual(adapted.getParam(p.name, "f64"));
    }
    merged.setParam(p.name, w, "f64", p.shape);
  }
  const seqs = [
    [3, 9, 27, 17, 51, 25, 11],
    [4, 8, 15, 16, 23],
  ];
  // scoring is no train step: dropout 0.5 must not apply
  const got = score(adapted, seqs).logprobs;
  const want = score(merged, seqs).logprobs;
  for (let s = 0; s < seqs.length; s++)
    for (let t = 0; t < seqs[s]!.length; t++) expect(Math.abs(got[s]![t]! - want[s]![t]!)).toBeLessThan(1e-6);
});

test("dropout applies in train steps: the loss varies between calls", async () => {
  using model = await tinyModel({ dtype: "f64", sharpen: 4 });
  model.addLora({ ...ALL, dropout: 0.5 });
  randomizeAdapters(model, 2, 0.3);
  const [row] = rows(3);
  const losses = Array.from({ length: 3 }, () => {
    const loss = trainStep(model, row!, { nRl: 11, nCe: 1, nRefKl: 1 }).all.loss;
    model.zeroGrad();
    return loss;
  });
  expect(new Set(losses).size).toBeGreaterThan(1);
});

test("bad LoRA settings are errors naming the problem; a second add is refused", async () => {
  using model = await tinyModel();
  expect(() => model.addLora({ ...ALL, targets: ["q_proj", "qk_proj" as "q_proj"] })).toThrow(
    /unknown LoRA target "qk_proj"/,
  );
  expect(() => model.addLora({ ...ALL, targets: [] })).toThrow(/LoRA targets are empty/);
  expect(() => model.addLora({ ...ALL, targets: ["q_proj", "q_proj"] })).toThrow(/listed twice/);
  expect(() => model.addLora({ ...ALL, rank: 0 })).toThrow(/rank must be >= 1/);
  expect(() => model.addLora({ ...ALL, dropout: 1 })).toThrow(/dropout must be in \[0, 1\)/);
  expect(model.loraParams()).toEqual([]);
  model.addLora(ALL);
  expect(() => model.addLora(ALL)).toThrow(/already has LoRA adapters/);
  expect(() => model.getMergedParam("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")).toThrow(
    /is an adapter tensor/,
  );
});

// RoPE scaling and Qwen2.5 through the shim against the independent float64 reference
// (reference_model.ts): Llama 3.1's "llama3" and YaRN configs, parsed from config.json blocks as
// published but with the original context shrunk so that 48-token sequences reach every regime
// (kept, blended and scaled frequencies), and a Qwen2.5-shaped config (q/k/v biases, tied). Also:
// the scaling really changes the logprobs (so the comparison can fail), a generator refuses to
// rebind across different scalings, and the shim refuses rope keys its rope_type does not read.
import { expect, setDefaultTimeout, test } from "bun:test";
import { parseModelConfig } from "../../src/model/config.ts";
import { NativeGenerator, score } from "../../src/native/generate.ts";
import { NativeModel, type ShimModelConfig } from "../../src/native/model.ts";
import { loadNative } from "../../src/native/ffi.ts";
import { referenceLogprobs } from "./reference_model.ts";
import { f64, readParams, rng, tinyModel } from "./tiny_model.ts";

setDefaultTimeout(120_000);

const SIZES = {
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  vocab_size: 64,
  max_position_embeddings: 256,
  rms_norm_eps: 1e-6,
};
const LLAMA3 = parseModelConfig(
  {
    ...SIZES,
    model_type: "llama",
    rope_theta: 10000,
    rope_scaling: {
      rope_type: "llama3",
      factor: 8,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: 64,
    },
  },
  "llama3",
).shim;
const YARN = parseModelConfig(
  {
    ...SIZES,
    model_type: "qwen3",
    rope_theta: 10000,
    rope_scaling: { rope_type: "yarn", factor: 4, original_max_position_embeddings: 64 },
  },
  "yarn",
).shim;
const QWEN2_5 = parseModelConfig(
  { ...SIZES, model_type: "qwen2", rope_theta: 1000000, tie_word_embeddings: true },
  "qwen2.5",
).shim;

/**
 * A float64 model with random norms and biases (so they matter), a sharpened head, and q/k
 * projections scaled up so attention is far from uniform (positions, hence RoPE, matter).
 */
async function randomModel(config: ShimModelConfig): Promise<NativeModel> {
  const model = await tinyModel({ dtype: "f64", config, sharpen: 20, seed: 7 });
  const rand = rng(13);
  for (const p of model.params()) {
    if (/[qk]_proj.weight$/.test(p.name))
      model.setParam(
        p.name,
        f64(model.getParam(p.name, "f64")).map((w) => w * 15),
        "f64",
        p.shape,
      );
    if (p.name.endsWith("norm.weight") || p.name.endsWith(".bias")) {
      const n = p.shape.reduce((a, b) => a * b, 1);
      model.setParam(
        p.name,
        Float64Array.from({ length: n }, () => 0.5 + rand()),
        "f64",
        p.shape,
      );
    }
  }
  return model;
}

const rand = rng(5);
const SEQS = [48, 17, 30].map((n) => Array.from({ length: n }, () => Math.floor(rand() * SIZES.vocab_size)));

for (const [label, config] of [
  ["llama3 scaling", LLAMA3],
  ["yarn scaling", YARN],
  ["qwen2.5 (q/k/v biases, tied)", QWEN2_5],
] as const) {
  test(`logprobs within 1e-5 of the float64 reference: ${label}`, async () => {
    using model = await randomModel(config);
    const params = readParams(model);
    const got = score(model, SEQS).logprobs;
    let worst = 0;
    SEQS.forEach((s, i) => {
      const want = referenceLogprobs(config, params, s);
      for (let t = 1; t < s.length; t++) worst = Math.max(worst, Math.abs(got[i]![t]! - want[t]!));
    });
    expect(worst).toBeLessThan(1e-5);
    if (!config.rope_scaling) return;
    // The same weights under plain RoPE give other logprobs: the check above can fail.
    const { rope_scaling: _, ...plain } = config;
    const unscaled = referenceLogprobs(plain, params, SEQS[0]!);
    const moved = Math.max(...unscaled.map((lp, t) => Math.abs(lp - got[0]![t]!)));
    expect(moved).toBeGreaterThan(0.1);
  });
}

test("a generator refuses to rebind to a model whose RoPE scaling differs", async () => {
  using a = await NativeModel.create(YARN, { seed: 1 });
  using b = await NativeModel.create({ ...YARN, rope_scaling: { ...YARN.rope_scaling!, factor: 2 } }, { seed: 1 });
  using gen = NativeGenerator.create(a, { slots: 1, capacity: 16 });
  expect(() => gen.setModel(b)).toThrow("RoPE scaling differs");
});

test("the shim refuses rope keys its rope_type does not read, and unknown rope types", async () => {
  const lib = await loadNative();
  const json = (extra: string) =>
    Buffer.from(
      `${JSON.stringify(SIZES).slice(0, -1)},"rope_theta":1e4,"tie_word_embeddings":false,"attention_bias":false,"qk_norm":false${extra}}\0`,
    );
  expect(lib.rlx_model_create(json(',"rope_factor":2'), 0, Buffer.from("cpu\0"), 0n)).toBeNull();
  expect(String(lib.rlx_last_error())).toContain('unknown key "rope_factor" (for rope_type "default")');
  expect(lib.rlx_model_create(json(',"rope_type":"dynamic"'), 0, Buffer.from("cpu\0"), 0n)).toBeNull();
  expect(String(lib.rlx_last_error())).toContain('"rope_type" must be "default", "llama3" or "yarn"');
  expect(lib.rlx_model_create(json(',"rope_type":"llama3","rope_factor":8'), 0, Buffer.from("cpu\0"), 0n)).toBeNull();
  expect(String(lib.rlx_last_error())).toContain('missing key "rope_high_freq_factor"');
});

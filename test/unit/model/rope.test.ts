// RoPE scaling blocks of config.json (src/model/rope.ts): the published Llama 3.1 and Qwen YaRN
// blocks resolve to explicit values with transformers' defaults, transformers 5's rope_parameters
// spelling reads the same, a save writes the resolved block back and it parses to the same model,
// and what rlx cannot run is refused naming the key.
import { describe, expect, test } from "bun:test";
import { ModelFileError } from "../../../src/errors.ts";
import { hfConfigObject, parseModelConfig } from "../../../src/model/config.ts";
import { shimConfigJson } from "../../../src/native/model.ts";

// meta-llama/Llama-3.1-8B's config.json, sizes shrunk (the rope block and theta as published).
const LLAMA_3_1 = {
  model_type: "llama",
  hidden_size: 64,
  intermediate_size: 128,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  num_hidden_layers: 2,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  rope_theta: 500000.0,
  rope_scaling: {
    factor: 8.0,
    low_freq_factor: 1.0,
    high_freq_factor: 4.0,
    original_max_position_embeddings: 8192,
    rope_type: "llama3",
  },
};

// Qwen3's model card: YaRN to 131k tokens.
const QWEN3_YARN = {
  model_type: "qwen3",
  hidden_size: 64,
  intermediate_size: 128,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  num_hidden_layers: 2,
  vocab_size: 151936,
  max_position_embeddings: 40960,
  rope_theta: 1000000,
  rope_scaling: { rope_type: "yarn", factor: 4.0, original_max_position_embeddings: 32768 },
};

function refusal(json: unknown): string {
  try {
    parseModelConfig(json, "config.json");
  } catch (err) {
    expect(err).toBeInstanceOf(ModelFileError);
    return (err as Error).message;
  }
  throw new Error("expected a refusal");
}

describe("RoPE scaling blocks", () => {
  test("llama3 resolves as published and reaches the shim as rope_type + rope_* keys", () => {
    const { shim } = parseModelConfig(LLAMA_3_1, "config.json");
    expect(shim.rope_scaling).toEqual({
      rope_type: "llama3",
      factor: 8,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: 8192,
    });
    expect(JSON.parse(shimConfigJson(shim))).toMatchObject({
      rope_type: "llama3",
      rope_factor: 8,
      rope_low_freq_factor: 1,
      rope_high_freq_factor: 4,
      rope_original_max_position_embeddings: 8192,
    });
  });

  test("yarn fills transformers' defaults: beta 32 / 1, attention factor 0.1 ln(factor) + 1, truncate", () => {
    const { shim } = parseModelConfig(QWEN3_YARN, "config.json");
    expect(shim.rope_scaling).toEqual({
      rope_type: "yarn",
      factor: 4,
      beta_fast: 32,
      beta_slow: 1,
      attention_factor: 0.1 * Math.log(4) + 1,
      original_max_position_embeddings: 32768,
      truncate: true,
    });
    // mscale / mscale_all_dim (DeepSeek's spelling) give their ratio; no factor: the positions' ratio.
    const { rope_scaling: _, ...plain } = QWEN3_YARN;
    const ratio = parseModelConfig(
      { ...plain, rope_scaling: { rope_type: "yarn", factor: 40, mscale: 1, mscale_all_dim: 0.5 } },
      "c",
    ).shim.rope_scaling;
    expect(ratio?.rope_type === "yarn" && ratio.attention_factor).toBeCloseTo(
      (0.1 * Math.log(40) + 1) / (0.05 * Math.log(40) + 1),
      12,
    );
    const noFactor = parseModelConfig(
      { ...plain, rope_scaling: { rope_type: "yarn", original_max_position_embeddings: 10240 } },
      "c",
    ).shim.rope_scaling;
    expect(noFactor?.factor).toBe(4);
  });

  test("transformers 5's rope_parameters spelling reads the same", () => {
    const { rope_scaling, rope_theta, ...rest } = LLAMA_3_1;
    const v5 = parseModelConfig({ ...rest, rope_parameters: { ...rope_scaling, rope_theta } }, "c").shim;
    expect(v5).toEqual(parseModelConfig(LLAMA_3_1, "c").shim);
  });

  test("a save writes the resolved block back, and it parses to the same model", () => {
    for (const json of [LLAMA_3_1, QWEN3_YARN]) {
      const config = parseModelConfig(json, "in");
      const saved = hfConfigObject(config, "float32");
      expect(saved.rope_scaling).toEqual({ ...config.shim.rope_scaling });
      expect(parseModelConfig(JSON.parse(JSON.stringify(saved)), "out").shim).toEqual(config.shim);
    }
  });

  test("refusals name the key", () => {
    const block = (extra: Record<string, unknown>) => ({
      ...LLAMA_3_1,
      rope_scaling: { ...LLAMA_3_1.rope_scaling, ...extra },
    });
    expect(refusal(block({ rope_type: "dynamic" }))).toContain(
      'rope_scaling.rope_type: "dynamic" RoPE scaling is not supported',
    );
    expect(refusal(block({ high_freq_factor: 1 }))).toContain("rope_scaling.high_freq_factor: must be greater");
    expect(refusal(block({ factor: -2 }))).toContain("rope_scaling.factor: expected a positive number");
    expect(refusal(block({ beta_fast: 16 }))).toContain('rope_scaling.beta_fast: not a key of rope_type "llama3"');
    expect(refusal({ ...QWEN3_YARN, rope_scaling: { rope_type: "yarn", factor: 4, truncate: "no" } })).toContain(
      "rope_scaling.truncate",
    );
    expect(refusal({ ...QWEN3_YARN, rope_scaling: 4 })).toContain("rope_scaling: expected an object or null");
  });
});

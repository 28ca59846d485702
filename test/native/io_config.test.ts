// config.json parsing (src/model/config.ts): real Llama / Qwen2 / Qwen3 configs normalize to the
// shim's 13 keys with each family's defaults, unsupported features are refused naming the file and
// key, and a save writes back a config that parses to the same architecture. Pure TS: no shim needed.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFileError } from "../../src/errors.ts";
import { hfConfigObject, modelConfigFromShim, parseModelConfig, readModelConfig } from "../../src/model/config.ts";
import { shimConfigJson } from "../../src/native/model.ts";

// The published config.json of Qwen/Qwen3-0.6B.
const QWEN3_0_6B = {
  architectures: ["Qwen3ForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: "silu",
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: "qwen3",
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.51.0",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

// Qwen/Qwen2.5-0.5B: no attention_bias key, but Qwen2 always has q/k/v biases; no head_dim key.
const QWEN2_5_0_5B = {
  architectures: ["Qwen2ForCausalLM"],
  hidden_act: "silu",
  hidden_size: 896,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 24,
  model_type: "qwen2",
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  use_sliding_window: false,
  vocab_size: 151936,
};

// A Llama-2-style config relying on defaults: no num_key_value_heads, head_dim, rope_theta or max positions.
const LLAMA_MINIMAL = {
  model_type: "llama",
  hidden_size: 256,
  num_attention_heads: 4,
  num_hidden_layers: 2,
  intermediate_size: 688,
  vocab_size: 1000,
};

function expectRefusal(json: unknown, ...parts: string[]): void {
  let caught: unknown;
  try {
    parseModelConfig(json, "m/config.json");
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ModelFileError);
  expect((caught as Error).message.startsWith("m/config.json: ")).toBe(true);
  for (const part of parts) expect((caught as Error).message).toContain(part);
}

describe("config.json parsing", () => {
  test("Qwen3-0.6B normalizes to its real shape with q/k norm and no biases", () => {
    const config = parseModelConfig(QWEN3_0_6B, "config.json");
    expect(config.modelType).toBe("qwen3");
    expect(config.torchDtype).toBe("bfloat16");
    expect(config.shim).toEqual({
      vocab_size: 151936,
      hidden_size: 1024,
      intermediate_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      rms_norm_eps: 1e-6,
      rope_theta: 1e6,
      max_position_embeddings: 40960,
      tie_word_embeddings: true,
      attention_bias: false,
      qk_norm: true,
    });
  });

  test("Qwen2.5 gets q/k/v biases without the key, and head_dim = hidden / heads", () => {
    const { shim } = parseModelConfig(QWEN2_5_0_5B, "config.json");
    expect(shim.attention_bias).toBe(true);
    expect(shim.qk_norm).toBe(false);
    expect(shim.head_dim).toBe(64);
    expect(shim.num_key_value_heads).toBe(2);
  });

  test("Llama defaults: kv heads = heads, rope_theta 1e4, 2048 positions, untied, eps 1e-6", () => {
    const { shim } = parseModelConfig(LLAMA_MINIMAL, "config.json");
    expect(shim).toMatchObject({
      num_key_value_heads: 4,
      head_dim: 64,
      rope_theta: 10000,
      max_position_embeddings: 2048,
    });
    expect(shim).toMatchObject({
      tie_word_embeddings: false,
      rms_norm_eps: 1e-6,
      attention_bias: false,
      qk_norm: false,
    });
  });

  test("transformers 5 rope_parameters give rope_theta; dtype replaces torch_dtype", () => {
    const json = { ...LLAMA_MINIMAL, dtype: "float32", rope_parameters: { rope_type: "default", rope_theta: 5e5 } };
    const config = parseModelConfig(json, "config.json");
    expect(config.shim.rope_theta).toBe(5e5);
    expect(config.torchDtype).toBe("float32");
  });

  test("shimConfigJson has exactly the 13 keys in the ABI's order", () => {
    const keys = Object.keys(JSON.parse(shimConfigJson(parseModelConfig(QWEN3_0_6B, "c").shim)));
    expect(keys).toEqual([
      "vocab_size",
      "hidden_size",
      "intermediate_size",
      "num_hidden_layers",
      "num_attention_heads",
      "num_key_value_heads",
      "head_dim",
      "rms_norm_eps",
      "rope_theta",
      "max_position_embeddings",
      "tie_word_embeddings",
      "attention_bias",
      "qk_norm",
    ]);
  });
});

describe("config.json refusals name the file and the key", () => {
  test("RoPE scaling rlx does not run, and incomplete llama3 / yarn blocks (test/unit/model/rope.test.ts: the rest)", () => {
    expectRefusal(
      { ...LLAMA_MINIMAL, rope_scaling: { rope_type: "llama3", factor: 32 } },
      "rope_scaling.low_freq_factor",
      'required for rope_type "llama3"',
    );
    expectRefusal({ ...LLAMA_MINIMAL, rope_scaling: { type: "linear", factor: 2 } }, "rope_scaling.type", '"linear"');
    expectRefusal(
      { ...LLAMA_MINIMAL, rope_parameters: { rope_type: "longrope", rope_theta: 1e4 } },
      "rope_parameters.rope_type",
      '"longrope"',
    );
  });

  test("mixture-of-experts models", () => {
    expectRefusal({ ...QWEN3_0_6B, model_type: "qwen3_moe", num_experts: 128 }, "model_type", "mixture-of-experts");
    expectRefusal({ ...LLAMA_MINIMAL, num_local_experts: 8 }, "num_local_experts: 8", "mixture-of-experts");
  });

  test("sliding-window attention", () => {
    expectRefusal({ ...QWEN2_5_0_5B, use_sliding_window: true }, "use_sliding_window");
    expectRefusal({ ...QWEN3_0_6B, layer_types: ["full_attention", "sliding_attention"] }, "layer_types");
  });

  test("unknown families, o_proj biases, other activations, MLP biases", () => {
    expectRefusal({ ...LLAMA_MINIMAL, model_type: "gpt2" }, "model_type", '"gpt2" is not supported');
    expectRefusal({ ...LLAMA_MINIMAL, attention_bias: true }, "attention_bias", "o_proj");
    expectRefusal({ ...LLAMA_MINIMAL, hidden_act: "gelu" }, "hidden_act");
    expectRefusal({ ...LLAMA_MINIMAL, mlp_bias: true }, "mlp_bias");
  });

  test("missing or malformed sizes", () => {
    const { hidden_size: _, ...noHidden } = LLAMA_MINIMAL;
    expectRefusal(noHidden, "hidden_size: required key is missing");
    expectRefusal({ ...LLAMA_MINIMAL, num_key_value_heads: 3 }, "num_key_value_heads", "does not divide");
    expectRefusal({ ...LLAMA_MINIMAL, vocab_size: 10.5 }, "vocab_size", "positive integer");
    expectRefusal({ ...LLAMA_MINIMAL, hidden_size: 250 }, "head_dim", "not a multiple");
    expectRefusal({ ...LLAMA_MINIMAL, tie_word_embeddings: "yes" }, "tie_word_embeddings");
    expectRefusal([1, 2], "expected a JSON object");
  });

  test("readModelConfig: a missing file and bad JSON", () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-cfg-"));
    try {
      expect(() => readModelConfig(dir)).toThrow(`${join(dir, "config.json")}: not found`);
      writeFileSync(join(dir, "config.json"), "{ nope");
      expect(() => readModelConfig(dir)).toThrow("not valid JSON");
      writeFileSync(join(dir, "config.json"), JSON.stringify(QWEN3_0_6B));
      expect(readModelConfig(dir).shim.head_dim).toBe(128);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("config.json for saves", () => {
  test("keeps unknown keys, states the normalized values and the saved dtype, and parses back identically", () => {
    for (const json of [QWEN3_0_6B, QWEN2_5_0_5B, LLAMA_MINIMAL]) {
      const config = parseModelConfig(json, "in");
      const saved = hfConfigObject(config, "float32");
      expect(saved.torch_dtype).toBe("float32");
      expect(parseModelConfig(saved, "out").shim).toEqual(config.shim);
    }
    const qwen3 = hfConfigObject(parseModelConfig(QWEN3_0_6B, "in"), "bfloat16");
    expect(qwen3).toMatchObject({
      bos_token_id: 151643,
      architectures: ["Qwen3ForCausalLM"],
      attention_bias: false,
      head_dim: 128,
    });
    const llama = hfConfigObject(parseModelConfig(LLAMA_MINIMAL, "in"), "float32");
    expect(llama).toMatchObject({
      architectures: ["LlamaForCausalLM"],
      num_key_value_heads: 4,
      head_dim: 64,
      rope_theta: 10000,
    });
    expect("attention_bias" in hfConfigObject(parseModelConfig(QWEN2_5_0_5B, "in"), "float32")).toBe(false);
  });

  test("modelConfigFromShim refuses a bias / norm combination the family cannot express", () => {
    const shim = parseModelConfig(QWEN3_0_6B, "c").shim;
    expect(modelConfigFromShim("qwen3", shim).shim).toEqual(shim);
    expect(() => modelConfigFromShim("llama", shim)).toThrow(ModelFileError);
  });
});

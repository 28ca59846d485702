// Named model shapes for `rlx init`: random-initialized models in Hugging Face layout with the
// byte-level tokenizer (src/model/byte_tokenizer.ts).
//
//   tiny        ~3.3M params. Qwen3 layout (q/k norm, no biases): hidden 256, 4 layers, 4 heads,
//               2 kv heads, head_dim 64, ffn 768, vocab 320. The shape of feasibility.md §4's
//               prototype, so its measured rates are the baseline. Embeddings untied: with a
//               320-token vocabulary tying saves only 82k parameters, and the untied path is the one
//               the qwen3-0.6b preset does not exercise, so tests cover both.
//   small       ~25.5M params. Same layout: hidden 512, 8 layers, 8 heads, 4 kv heads, ffn 1536.
//   qwen3-0.6b  The real Qwen3-0.6B shape (hidden 1024, 28 layers, 16/8 heads, head_dim 128, ffn 3072,
//               vocab 151936, rope_theta 1e6, tied, max positions 40960). Its real tokenizer is not
//               available offline, so it gets the byte tokenizer but keeps the 151936-row embedding,
//               so a checkpoint has exactly the shapes of the real model (ids >= 259 are unused).
//
// Tiny vocabularies are 259 (bytes + 3 specials) rounded up to a multiple of 64 = 320.
import { ConfigError } from "../errors.ts";
import { BYTE_TOKENIZER_SIZE, ENDOFTEXT_ID, IM_END_ID, paddedVocabSize } from "./byte_tokenizer.ts";
import { type ModelConfig, modelConfigFromShim, type ShimModelConfig } from "./config.ts";

/** A named shape `rlx init --preset` can build. */
export interface Preset {
  name: string;
  description: string;
  config: ModelConfig;
}

// Keys transformers reads that the shim does not need; written into config.json.
const EXTRA = {
  initializer_range: 0.02,
  bos_token_id: ENDOFTEXT_ID,
  eos_token_id: IM_END_ID,
  pad_token_id: ENDOFTEXT_ID,
  attention_dropout: 0.0,
  use_cache: true,
  use_sliding_window: false,
  sliding_window: null,
};

function qwen3(shim: Omit<ShimModelConfig, "attention_bias" | "qk_norm">): ModelConfig {
  return modelConfigFromShim("qwen3", { ...shim, attention_bias: false, qk_norm: true }, EXTRA);
}

const BYTE_VOCAB = paddedVocabSize(BYTE_TOKENIZER_SIZE);

/** The presets, by name. */
export const PRESETS: Record<string, Preset> = {
  tiny: {
    name: "tiny",
    description: "~3.3M params, Qwen3 layout, byte vocabulary: CPU tests and laptop runs",
    config: qwen3({
      vocab_size: BYTE_VOCAB,
      hidden_size: 256,
      intermediate_size: 768,
      num_hidden_layers: 4,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 64,
      rms_norm_eps: 1e-6,
      rope_theta: 10000,
      max_position_embeddings: 4096,
      tie_word_embeddings: false,
    }),
  },
  small: {
    name: "small",
    description: "~25.5M params, Qwen3 layout, byte vocabulary: CPU experiments that can learn something",
    config: qwen3({
      vocab_size: BYTE_VOCAB,
      hidden_size: 512,
      intermediate_size: 1536,
      num_hidden_layers: 8,
      num_attention_heads: 8,
      num_key_value_heads: 4,
      head_dim: 64,
      rms_norm_eps: 1e-6,
      rope_theta: 10000,
      max_position_embeddings: 4096,
      tie_word_embeddings: false,
    }),
  },
  "qwen3-0.6b": {
    name: "qwen3-0.6b",
    description: "the real Qwen3-0.6B shape (596M params) with the byte tokenizer: GPU runs and load tests",
    config: qwen3({
      vocab_size: 151936,
      hidden_size: 1024,
      intermediate_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      max_position_embeddings: 40960,
      tie_word_embeddings: true,
    }),
  },
};

/** The preset of that name, or a ConfigError listing the names. */
export function getPreset(name: string): Preset {
  const preset = PRESETS[name];
  if (!preset) {
    throw new ConfigError(`unknown preset "${name}"`, { fix: `use one of: ${Object.keys(PRESETS).join(", ")}` });
  }
  return preset;
}

/** Parameter count of a shape, in closed form (the shim's parameter list must agree). */
export function countParams(shim: ShimModelConfig): number {
  const h = shim.hidden_size;
  const q = shim.num_attention_heads * shim.head_dim;
  const kv = shim.num_key_value_heads * shim.head_dim;
  const attention = h * q + 2 * h * kv + q * h + (shim.attention_bias ? q + 2 * kv : 0) + (shim.qk_norm ? 2 * shim.head_dim : 0);
  const layer = attention + 3 * h * shim.intermediate_size + 2 * h;
  const embeddings = shim.vocab_size * h * (shim.tie_word_embeddings ? 1 : 2);
  return embeddings + shim.num_hidden_layers * layer + h;
}

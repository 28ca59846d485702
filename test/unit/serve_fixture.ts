// Shared fixture for the inference tests (engine, LocalClient, rlx serve): a micro Qwen3-layout
// model with the byte tokenizer and ChatML template, written as a real HF directory, so every test
// loads it the way `rlx serve --model DIR` does. Small enough that a decode step is well under a
// millisecond on two cores. The output head is scaled up so next-token distributions are peaked
// (a random model is nearly uniform over 320 tokens, which makes seeds and stops uninteresting).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeByteTokenizer } from "../../src/model/byte_tokenizer.ts";
import { modelConfigFromShim } from "../../src/model/config.ts";
import { saveModel } from "../../src/model/hf.ts";
import { NativeModel, type ShimModelConfig } from "../../src/native/model.ts";

export const MICRO: ShimModelConfig = {
  vocab_size: 320,
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 512,
  tie_word_embeddings: false,
  attention_bias: false,
  qk_norm: true,
};

/** Writes a seeded micro model to a fresh temporary directory (or `dir`) and returns the directory. */
export async function microModelDir(options: { seed?: number; sharpen?: number; dir?: string } = {}): Promise<string> {
  const dir = options.dir ?? join(mkdtempSync(join(tmpdir(), "rlx-serve-")), "model");
  const config = modelConfigFromShim("qwen3", MICRO, { eos_token_id: 258, bos_token_id: 256 });
  using model = await NativeModel.create(MICRO, { seed: options.seed ?? 1 });
  const head = model.getParam("lm_head.weight", "f32");
  const scaled = new Float32Array(head.buffer, head.byteOffset, head.byteLength / 4).map((x) => x * (options.sharpen ?? 8));
  model.setParam("lm_head.weight", scaled, "f32", model.param("lm_head.weight").shape);
  saveModel(model, dir, { dtype: "f32", config, writeExtra: writeByteTokenizer });
  return dir;
}

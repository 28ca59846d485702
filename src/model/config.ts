// A model's config.json: read a Hugging Face Llama / Qwen2 / Qwen3 config into the normalized flat
// form the shim builds a model from, refuse what rlx cannot run, and write config.json back in HF
// form for saves.
//
// Why normalize here and not in C++: the defaults differ per family and across transformers
// versions (Qwen2 always has q/k/v biases without saying so; Qwen3 has q/k norms; transformers 5
// moved rope_theta into rope_parameters), and a refusal must name the file and the key, which TS
// can do with a readable message. The shim then sees exactly 13 keys (ShimModelConfig, serialized
// by shimConfigJson in src/native/model.ts), plus the resolved RoPE scaling (rope.ts) when the
// model has one, and no family logic.
//
// What the shim's `attention_bias` means: biases on q_proj, k_proj and v_proj (Qwen2's layout).
// Llama's and Qwen3's `attention_bias: true` also puts a bias on o_proj, which rlx does not build,
// so those are refused rather than loaded with a tensor silently dropped.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ModelFileError } from "../errors.ts";
import type { ShimModelConfig } from "../native/model.ts";
import { parseRopeScaling, ropeScalingObject } from "./rope.ts";

// The 13-key normalized config (rlx_model_create's config_json) is declared next to the shim wrapper.
export type { ShimModelConfig } from "../native/model.ts";

/** The projections LoRA may adapt, in PEFT's module names (rlx.h, rlx_model_lora_add). */
export const LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/** The model families rlx runs, by config.json `model_type`. */
export type ModelType = "llama" | "qwen2" | "qwen3";

/** A parsed config.json: the shim's view plus what a save needs to write it back. */
export interface ModelConfig {
  /** config.json `model_type`. */
  modelType: ModelType;
  /** The normalized architecture. */
  shim: ShimModelConfig;
  /** config.json `torch_dtype` (or transformers 5's `dtype`), e.g. "bfloat16"; undefined if absent. */
  torchDtype: string | undefined;
  /** The config.json object as read: keys rlx does not interpret are written back unchanged. */
  source: Record<string, unknown>;
}

const ARCHITECTURES: Record<ModelType, string> = {
  llama: "LlamaForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
};
const DEFAULT_MAX_POSITIONS: Record<ModelType, number> = { llama: 2048, qwen2: 32768, qwen3: 32768 };

/** The HF class name for a family, as config.json `architectures` spells it. */
export function architectureOf(modelType: ModelType): string {
  return ARCHITECTURES[modelType];
}

/** Parses a config.json object; `file` names it in errors. */
export function parseModelConfig(json: unknown, file: string): ModelConfig {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new ModelFileError(`${file}: expected a JSON object`, {
      fix: "use the config.json of a Hugging Face model directory",
    });
  }
  const raw = json as Record<string, unknown>;
  const refuse = (key: string, what: string): never => {
    throw new ModelFileError(`${file}: ${key}: ${what}`, {
      fix: "rlx runs dense Llama / Qwen2 / Qwen3 decoders with full attention and plain, llama3 or yarn RoPE; pick such a model",
    });
  };
  const modelType = String(raw.model_type ?? "");
  if (/moe|mixtral|deepseek/i.test(modelType))
    refuse("model_type", `mixture-of-experts models are not supported ("${modelType}")`);
  for (const key of ["num_experts", "num_local_experts"]) {
    if (positive(raw[key])) refuse(key, `${raw[key]}: mixture-of-experts models are not supported`);
  }
  if (!(modelType in ARCHITECTURES))
    refuse("model_type", `"${modelType}" is not supported (supported: llama, qwen2, qwen3)`);
  const type = modelType as ModelType;

  const int = (key: string, fallback?: number): number => {
    const value = raw[key] ?? fallback;
    if (value === undefined) refuse(key, "required key is missing");
    if (typeof value !== "number" || !Number.isInteger(value) || value <= 0)
      refuse(key, `expected a positive integer, got ${JSON.stringify(value)}`);
    return value as number;
  };
  const num = (key: string, value: unknown): number => {
    if (typeof value !== "number" || !(value > 0))
      refuse(key, `expected a positive number, got ${JSON.stringify(value)}`);
    return value as number;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const value = raw[key] ?? fallback;
    if (typeof value !== "boolean") refuse(key, `expected true or false, got ${JSON.stringify(value)}`);
    return value as boolean;
  };

  const hidden = int("hidden_size");
  const heads = int("num_attention_heads");
  const kvHeads = int("num_key_value_heads", heads);
  if (heads % kvHeads !== 0) refuse("num_key_value_heads", `${kvHeads} does not divide num_attention_heads ${heads}`);
  if (raw.head_dim == null && hidden % heads !== 0)
    refuse("head_dim", `missing, and hidden_size ${hidden} is not a multiple of num_attention_heads ${heads}`);
  const headDim = int("head_dim", hidden / heads);

  const act = raw.hidden_act ?? "silu";
  if (act !== "silu") refuse("hidden_act", `"${String(act)}" is not supported (only silu, the SwiGLU MLP)`);
  if (raw.mlp_bias === true) refuse("mlp_bias", "MLP biases are not supported");
  if (raw.use_sliding_window === true) refuse("use_sliding_window", "sliding-window attention is not supported");
  if (Array.isArray(raw.layer_types) && raw.layer_types.some((t) => t !== "full_attention")) {
    refuse("layer_types", "only full_attention layers are supported");
  }
  const declaredBias = bool("attention_bias", false);
  if (declaredBias && type !== "qwen2")
    refuse("attention_bias", `true adds an o_proj bias, which rlx does not build for ${type}`);

  // rope: transformers <= 4 has rope_theta + rope_scaling; 5 has rope_parameters {rope_type, rope_theta}.
  const ropeParams = isObject(raw.rope_parameters) ? raw.rope_parameters : undefined;
  if (raw.rope_parameters != null && !ropeParams)
    refuse("rope_parameters", `expected an object or null, got ${JSON.stringify(raw.rope_parameters)}`);
  if (raw.rope_scaling != null && !isObject(raw.rope_scaling))
    refuse("rope_scaling", `expected an object or null, got ${JSON.stringify(raw.rope_scaling)}`);
  const ropeTheta = num(
    ropeParams?.rope_theta !== undefined ? "rope_parameters.rope_theta" : "rope_theta",
    ropeParams?.rope_theta ?? raw.rope_theta ?? 10000,
  );
  const maxPositions = int("max_position_embeddings", DEFAULT_MAX_POSITIONS[type]);
  const ropeBlock = ropeParams ?? (raw.rope_scaling as Record<string, unknown> | null | undefined);
  const ropeScaling = ropeBlock
    ? parseRopeScaling(ropeParams ? "rope_parameters" : "rope_scaling", ropeBlock, maxPositions, refuse)
    : undefined;

  const shim: ShimModelConfig = {
    vocab_size: int("vocab_size"),
    hidden_size: hidden,
    intermediate_size: int("intermediate_size"),
    num_hidden_layers: int("num_hidden_layers"),
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: headDim,
    rms_norm_eps: num("rms_norm_eps", raw.rms_norm_eps ?? 1e-6),
    rope_theta: ropeTheta,
    max_position_embeddings: maxPositions,
    tie_word_embeddings: bool("tie_word_embeddings", false),
    attention_bias: type === "qwen2",
    qk_norm: type === "qwen3",
    ...(ropeScaling ? { rope_scaling: ropeScaling } : {}),
  };
  const dtype = raw.torch_dtype ?? raw.dtype;
  return { modelType: type, shim, torchDtype: typeof dtype === "string" ? dtype : undefined, source: raw };
}

/** Reads and parses `dir/config.json`. */
export function readModelConfig(dir: string): ModelConfig {
  const file = join(dir, "config.json");
  if (!existsSync(file)) {
    throw new ModelFileError(`${file}: not found`, {
      fix: "point at a Hugging Face model directory, or make one with `rlx init`",
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ModelFileError(`${file}: not valid JSON (${(err as Error).message})`, {
      fix: "restore the file from the model's source",
    });
  }
  return parseModelConfig(json, file);
}

/** Names of the HF `torch_dtype` values rlx writes. */
export type SavedDtype = "float32" | "bfloat16" | "float16";

/**
 * config.json for a save: the source object with every interpreted key replaced by its normalized
 * value (so the file states what rlx actually built) and `torch_dtype` set to the saved dtype.
 */
export function hfConfigObject(config: ModelConfig, dtype: SavedDtype): Record<string, unknown> {
  const { shim, modelType } = config;
  const out: Record<string, unknown> = {
    architectures: [architectureOf(modelType)],
    model_type: modelType,
    ...config.source,
    vocab_size: shim.vocab_size,
    hidden_size: shim.hidden_size,
    intermediate_size: shim.intermediate_size,
    num_hidden_layers: shim.num_hidden_layers,
    num_attention_heads: shim.num_attention_heads,
    num_key_value_heads: shim.num_key_value_heads,
    head_dim: shim.head_dim,
    hidden_act: "silu",
    rms_norm_eps: shim.rms_norm_eps,
    rope_theta: shim.rope_theta,
    rope_scaling: ropeScalingObject(shim.rope_scaling),
    max_position_embeddings: shim.max_position_embeddings,
    tie_word_embeddings: shim.tie_word_embeddings,
    torch_dtype: dtype,
  };
  out.architectures = [architectureOf(modelType)];
  out.model_type = modelType;
  // Qwen2 modeling code hard-wires its q/k/v biases; the key only exists for Llama and Qwen3.
  if (modelType === "qwen2") delete out.attention_bias;
  else out.attention_bias = false;
  if (isObject(out.rope_parameters)) {
    out.rope_parameters = {
      rope_theta: shim.rope_theta,
      ...(ropeScalingObject(shim.rope_scaling) ?? { rope_type: "default" }),
    };
  }
  delete out.dtype;
  return out;
}

/** Builds a ModelConfig from a normalized architecture (presets, `rlx init --config`). */
export function modelConfigFromShim(
  modelType: ModelType,
  shim: ShimModelConfig,
  extra: Record<string, unknown> = {},
): ModelConfig {
  const expected = { attention_bias: modelType === "qwen2", qk_norm: modelType === "qwen3" };
  if (shim.attention_bias !== expected.attention_bias || shim.qk_norm !== expected.qk_norm) {
    throw new ModelFileError(
      `model_type ${modelType} implies attention_bias=${expected.attention_bias} qk_norm=${expected.qk_norm}, got ${shim.attention_bias}/${shim.qk_norm}`,
      { fix: "use qwen2 for q/k/v biases, qwen3 for q/k norms, llama for neither" },
    );
  }
  const source = { ...extra, model_type: modelType, ...shim };
  delete (source as Record<string, unknown>).qk_norm;
  return parseModelConfig(source, "(preset)");
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function positive(value: unknown): boolean {
  return typeof value === "number" && value > 0;
}

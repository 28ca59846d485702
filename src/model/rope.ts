// RoPE scaling from a config.json: transformers <= 4 writes `rope_scaling` ({rope_type | type,
// factor, ...}), transformers 5 writes `rope_parameters` ({rope_type, rope_theta, ...}). rlx runs
// plain RoPE, Llama 3.1's "llama3" scaling and "yarn"; this file resolves every default the way
// transformers' modeling_rope_utils does, so the shim (native/src/rope.cpp) and the saved
// config.json see explicit numbers, and refuses anything else naming the key.
//
// YaRN's `factor` is taken as written (as vLLM does); only when it is absent is it
// max_position_embeddings / original_max_position_embeddings. The attention factor defaults to
// 0.1 ln(factor) + 1, or the ratio of the two mscales when `mscale` and `mscale_all_dim` are set.
import type { ShimRopeScaling } from "../native/model.ts";

/** The keys each rope_type reads; any other key in the block is refused (it would be ignored). */
const KEYS: Record<string, string[]> = {
  default: [],
  llama3: ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"],
  yarn: [
    "factor",
    "attention_factor",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "original_max_position_embeddings",
    "truncate",
  ],
};

/** Why a block was refused: the dotted key and what is wrong with it. */
export type RopeRefusal = (key: string, what: string) => never;

/**
 * The scaling of one rope block (`name` is "rope_scaling" or "rope_parameters", for errors), or
 * undefined for plain RoPE. `maxPositions` is the config's max_position_embeddings.
 */
export function parseRopeScaling(
  name: string,
  block: Record<string, unknown>,
  maxPositions: number,
  refuse: RopeRefusal,
): ShimRopeScaling | undefined {
  const typeKey = block.rope_type !== undefined ? "rope_type" : "type";
  const ropeType = String(block[typeKey] ?? "default");
  const keys = KEYS[ropeType];
  if (!keys)
    refuse(`${name}.${typeKey}`, `"${ropeType}" RoPE scaling is not supported (supported: default, llama3, yarn)`);
  for (const key of Object.keys(block)) {
    if (key !== "rope_type" && key !== "type" && key !== "rope_theta" && !keys!.includes(key))
      refuse(`${name}.${key}`, `not a key of rope_type "${ropeType}" that rlx reads (it would be ignored)`);
  }
  const positive = (key: string, fallback?: number): number => {
    const value = block[key] ?? fallback;
    if (value === undefined) refuse(`${name}.${key}`, `required for rope_type "${ropeType}"`);
    if (typeof value !== "number" || !(value > 0))
      refuse(`${name}.${key}`, `expected a positive number, got ${JSON.stringify(value)}`);
    return value as number;
  };
  if (ropeType === "llama3") {
    const scaling = {
      rope_type: "llama3" as const,
      factor: positive("factor"),
      low_freq_factor: positive("low_freq_factor"),
      high_freq_factor: positive("high_freq_factor"),
      original_max_position_embeddings: positive("original_max_position_embeddings"),
    };
    if (scaling.high_freq_factor <= scaling.low_freq_factor)
      refuse(`${name}.high_freq_factor`, `must be greater than low_freq_factor (${scaling.low_freq_factor})`);
    return scaling;
  }
  if (ropeType === "yarn") {
    const original = positive("original_max_position_embeddings", maxPositions);
    const factor = positive("factor", maxPositions / original);
    const mscale = (scale: number, m: number) => (scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1);
    const hasMscales = block.mscale != null && block.mscale_all_dim != null;
    const defaultAttention = hasMscales
      ? mscale(factor, positive("mscale")) / mscale(factor, positive("mscale_all_dim"))
      : mscale(factor, 1);
    const truncate = block.truncate ?? true;
    if (typeof truncate !== "boolean")
      refuse(`${name}.truncate`, `expected true or false, got ${JSON.stringify(truncate)}`);
    return {
      rope_type: "yarn",
      factor,
      beta_fast: positive("beta_fast", 32),
      beta_slow: positive("beta_slow", 1),
      attention_factor: positive("attention_factor", defaultAttention),
      original_max_position_embeddings: original,
      truncate: truncate as boolean,
    };
  }
  return undefined;
}

/** The block a save writes back for a resolved scaling (explicit values, transformers 4 names). */
export function ropeScalingObject(scaling: ShimRopeScaling | undefined): Record<string, unknown> | null {
  return scaling ? { ...scaling } : null;
}

// The model shape `rlx plan` plans for: a preset's (src/model/presets.ts) or a model directory's
// config.json, read the way a run reads it, without loading any weights.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../errors.ts";
import { readModelConfig, type ShimModelConfig } from "../model/config.ts";
import { PRESETS } from "../model/presets.ts";

export interface PlannedModel {
  /** The preset's name or the directory, as given. */
  name: string;
  shape: ShimModelConfig;
  /** Bytes per parameter of its safetensors file (config.json torch_dtype; presets: bf16). */
  fileBytesPerParam: number;
}

/** `source` is a preset name or a model directory; `origin` says where it came from, for errors. */
export function plannedModel(source: string, origin: string): PlannedModel {
  const preset = PRESETS[source];
  if (preset) return { name: source, shape: preset.config.shim, fileBytesPerParam: 2 };
  if (!existsSync(join(source, "config.json")))
    throw new ConfigError(`${origin}: ${source} is neither a preset nor a model directory with a config.json`, {
      fix: `download the model first, or plan a shape with --model PRESET (${Object.keys(PRESETS).join(", ")}) or --model DIR (a directory holding a Hugging Face config.json)`,
    });
  const config = readModelConfig(source);
  const dtype = config.torchDtype ?? "bfloat16";
  return { name: source, shape: config.shim, fileBytesPerParam: dtype === "float32" ? 4 : 2 };
}

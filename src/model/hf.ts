// Load and save a model directory in Hugging Face layout (config.json, model.safetensors or shards
// with model.safetensors.index.json, tokenizer files), so a checkpoint rlx writes opens in
// transformers and vLLM, and a model from the Hub trains in rlx.
//
// Why built this way:
//   - config.json decides the architecture; the safetensors must match it tensor for tensor. A
//     missing tensor, an unexpected one, or a shape that disagrees is a ModelFileError naming the
//     file and the tensor: loading "most" of a model would train garbage without a sign.
//   - Tensors go from the mmap straight into the shim (zero-copy), converted to the run dtype there;
//     the mapping is released right after (releaseMappings), not whenever the GC gets to it.
//   - Saves fetch one parameter at a time from the shim while writing, so a save costs one tensor of
//     JS memory, and they are atomic: everything is written to `DIR.tmp-<pid>` and renamed into
//     place, so a reader (the inference server reloading weights) never sees half a model.
//   - Every save records the size and CRC-32 of each weight file (and tensor) in checksums.json
//     before the rename, and every load checks them first (checksums.ts, integrity.ts): bytes
//     flipped on disk are a ChecksumError naming the file and tensor, not silently wrong weights.
//   - Tied embeddings: no lm_head.weight is written (transformers and vLLM tie on load); one
//     present in a tied checkpoint is ignored.
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { ModelFileError } from "../errors.ts";
import { type DType, NativeModel } from "../native/model.ts";
import { applyAdapter, checkedAdapter, isAdapterDir, readAdapter, sameAdapterShape, saveAdapter } from "./adapter.ts";
import { type Checksums, CHECKSUMS_FILE, checksumsFileText } from "./checksums.ts";
import { hfConfigObject, type ModelConfig, readModelConfig, type SavedDtype } from "./config.ts";
import { replaceDir, TOKENIZER_FILES } from "./dir_files.ts";
import { assertWhole, checkModelDir } from "./integrity.ts";
import {
  readSafetensorsDir,
  type SafetensorsDtype,
  type TensorToWrite,
  tensorBytes,
  writeSafetensorsDir,
} from "./safetensors.ts";

export { TOKENIZER_FILES } from "./dir_files.ts";

const FILE_DTYPE: Partial<Record<SafetensorsDtype, DType>> = { F32: "f32", BF16: "bf16", F16: "f16", F64: "f64" };
const SAVE_DTYPE: Record<"f32" | "bf16" | "f16", { st: SafetensorsDtype; hf: SavedDtype }> = {
  f32: { st: "F32", hf: "float32" },
  bf16: { st: "BF16", hf: "bfloat16" },
  f16: { st: "F16", hf: "float16" },
};

// Buffers some older Llama checkpoints carry; recomputed from config.json, never loaded.
const IGNORED = /\.rotary_emb\.inv_freq$/;

/** Options of loadModel. */
export interface LoadOptions {
  /** The run's parameter dtype (the file's dtype is converted). Default f32. */
  dtype?: DType;
  /** "cpu" or "cuda[:N]". Default cpu. */
  device?: string;
}

/**
 * Builds a NativeModel from a model directory; weights of any float dtype are converted to `dtype`.
 * A LoRA adapter directory (adapter.ts) loads its base model, then adds and fills the adapter:
 * the model applies it at every forward, unmerged.
 */
export async function loadModel(dir: string, options: LoadOptions = {}): Promise<NativeModel> {
  if (!isAdapterDir(dir)) {
    const model = await loadFullModel(dir, options);
    releaseMappings();
    baseDirs.set(model, resolve(dir));
    return model;
  }
  const adapter = readAdapter(dir);
  const model = await loadFullModel(adapter.baseDir, options);
  releaseMappings();
  try {
    model.addLora(adapter.spec);
    applyAdapter(model, adapter);
    baseDirs.set(model, adapter.baseDir);
    return model;
  } catch (err) {
    model.free();
    throw err;
  }
}

/**
 * Unmaps the safetensors files a load read. The shim has copied every tensor, but a mapping stays
 * resident (its pages count in the process's RSS: 1.05 GiB after loading 8 layers of the
 * qwen3-0.6b shape) until the garbage collector finalizes its array, which an idle trainer or a
 * policy server reloading every step may not do for a long time; one full collection here frees
 * it before the caller allocates activations or the next step's weights.
 */
function releaseMappings(): void {
  Bun.gc(true);
}

// The base model directory each loaded model came from (an adapter's base for adapter directories).
const baseDirs = new WeakMap<NativeModel, string>();

/**
 * When `dir` is an adapter for the model's own base with the model's LoRA settings (rank, alpha,
 * targets), returns the function that copies it into the model in place, every tensor checked
 * first; null when `dir` needs a full load (full weights, another base, other settings). A
 * policy's weight update then moves the adapter's megabytes, not the model (engine/engine.ts).
 */
export function adapterSwap(model: NativeModel, dir: string): (() => void) | null {
  if (!model.lora || !isAdapterDir(dir)) return null;
  const adapter = readAdapter(dir);
  if (adapter.baseDir !== baseDirs.get(model) || !sameAdapterShape(model.lora, adapter.spec)) return null;
  return checkedAdapter(model, adapter);
}

/** The base model directory behind `dir`: itself, or an adapter's base_model_name_or_path. */
export function baseModelDir(dir: string): string {
  return isAdapterDir(dir) ? readAdapter(dir).baseDir : dir;
}

async function loadFullModel(dir: string, options: LoadOptions): Promise<NativeModel> {
  const config = readModelConfig(dir);
  assertWhole(dir, checkModelDir(dir), "the model directory");
  const tensors = readSafetensorsDir(dir);
  const model = await NativeModel.create(config.shim, {
    dtype: options.dtype ?? "f32",
    device: options.device ?? "cpu",
  });
  try {
    const fix = { fix: "the weights do not belong to this config.json; re-download or re-save the model" };
    const expected = new Set<string>();
    for (const { name, shape } of model.params()) {
      expected.add(name);
      const view = tensors.get(name);
      if (!view) throw new ModelFileError(`${dir}: tensor ${name} is missing (config.json implies it)`, fix);
      if (view.shape.join() !== shape.join()) {
        throw new ModelFileError(
          `${view.file}: tensor ${name} has shape [${view.shape.join(", ")}], config.json implies [${shape.join(", ")}]`,
          fix,
        );
      }
      const dtype = FILE_DTYPE[view.dtype];
      if (!dtype)
        throw new ModelFileError(
          `${view.file}: tensor ${name} is ${view.dtype}; weights must be F32, BF16, F16 or F64`,
          fix,
        );
      model.setParam(name, view.data, dtype, view.shape);
    }
    for (const [name, view] of tensors) {
      if (expected.has(name) || IGNORED.test(name)) continue;
      if (name === "lm_head.weight" && config.shim.tie_word_embeddings) continue;
      throw new ModelFileError(
        `${view.file}: unexpected tensor ${name} (not part of the model config.json describes)`,
        fix,
      );
    }
    return model;
  } catch (err) {
    model.free();
    throw err;
  }
}

/** Options of saveModel. */
export interface SaveOptions {
  /** The dtype written to disk. */
  dtype: "f32" | "bf16" | "f16";
  /** The directory the model came from: its config.json extras and tokenizer files are carried over. */
  sourceDir?: string;
  /** The config to write (default: sourceDir's config.json). Must describe the model's architecture. */
  config?: ModelConfig;
  /** Largest shard in bytes; above it the weights are sharded with an index. Default 5 GB (transformers'). */
  shardBytes?: number;
  /** Writes further files into the (temporary) directory before it is moved into place. */
  writeExtra?: (dir: string) => void;
  /**
   * A model with LoRA: false (default) writes the adapter alone in PEFT's layout (adapter.ts), true
   * writes full weights with the adapter merged in (W + (alpha / rank) B A), for tools without LoRA.
   */
  merged?: boolean;
}

/** What saveModel wrote. */
export interface SavedModel {
  dir: string;
  /** File names inside dir, sorted. */
  files: string[];
  /** Bytes of tensor data. */
  tensorBytes: number;
  /** Size and CRC-32 of each weight file (as recorded in its checksums.json), per tensor too. */
  checksums: Checksums;
}

/** Writes the model to `dir` atomically (replacing what is there) in Hugging Face layout. */
export function saveModel(model: NativeModel, dir: string, options: SaveOptions): SavedModel {
  const baseDir = options.sourceDir ? baseModelDir(options.sourceDir) : undefined;
  if (model.lora && !options.merged) {
    if (!baseDir) throw new ModelFileError(`saving the adapter ${dir}: no base model`, { fix: "pass sourceDir" });
    return saveAdapter(model, dir, { baseDir, tokenizerDir: options.sourceDir, writeExtra: options.writeExtra });
  }
  const config = options.config ?? (baseDir ? readModelConfig(baseDir) : undefined);
  if (!config)
    throw new ModelFileError(`saving ${dir}: no config`, { fix: "pass sourceDir (the model's directory) or config" });
  for (const [key, value] of Object.entries(config.shim)) {
    if (model.config[key as keyof typeof model.config] !== value) {
      throw new ModelFileError(
        `saving ${dir}: config.json says ${key} = ${value}, the model has ${model.config[key as keyof typeof model.config]}`,
        {
          fix: "save with the config the model was built from",
        },
      );
    }
  }
  const { st, hf } = SAVE_DTYPE[options.dtype];
  const tmp = join(dirname(dir), `${basename(dir)}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const tensors: TensorToWrite[] = model.params().map(({ name, shape }) => ({
      name,
      dtype: st,
      shape,
      data: () => (model.lora ? model.getMergedParam(name, options.dtype) : model.getParam(name, options.dtype)),
    }));
    const checksums = writeSafetensorsDir(tmp, tensors, options.shardBytes ?? 5e9);
    writeFileSync(join(tmp, CHECKSUMS_FILE), checksumsFileText(checksums));
    writeFileSync(join(tmp, "config.json"), JSON.stringify(hfConfigObject(config, hf), null, 2) + "\n");
    for (const name of options.sourceDir ? TOKENIZER_FILES : []) {
      const from = join(options.sourceDir!, name);
      if (existsSync(from)) cpSync(from, join(tmp, name));
    }
    options.writeExtra?.(tmp);
    replaceDir(tmp, dir);
    return {
      dir,
      files: readdirSync(dir).sort(),
      tensorBytes: tensors.reduce((sum, t) => sum + tensorBytes(st, t.shape), 0),
      checksums,
    };
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

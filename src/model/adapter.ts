// LoRA adapter directories in PEFT's layout (docs/lora.md): `adapter_model.safetensors` holding
// the A and B matrices under PEFT's saved names, and `adapter_config.json` with the keys PEFT
// 0.14.0's LoraConfig.save_pretrained writes (sorted, two-space indent, as it writes them), so an
// adapter rlx trains loads with `PeftModel.from_pretrained` and in vLLM's LoRA support, and one
// trained by PEFT (default LoRA: no DoRA, no rsLoRA, no bias, no rank or alpha patterns) loads in
// rlx. `base_model_name_or_path` is the base model's directory, as an absolute path.
//
// Checksums are recorded in checksums.json as for model directories (integrity.ts checks them on
// load); tokenizer files are copied beside the adapter, so `rlx serve --model ADAPTER_DIR` finds them.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { ConfigError, ModelFileError } from "../errors.ts";
import type { LoraSpec, NativeModel } from "../native/model.ts";
import type { AdapterShape } from "../native/weights.ts";
import { LORA_TARGETS, type LoraTarget } from "./config.ts";
import { type Checksums, CHECKSUMS_FILE, checksumsFileText } from "./checksums.ts";
import { replaceDir, TOKENIZER_FILES } from "./dir_files.ts";
import { assertWhole, checkModelDir } from "./integrity.ts";
import { readSafetensors, type TensorView, writeSafetensors } from "./safetensors.ts";

export const ADAPTER_WEIGHTS = "adapter_model.safetensors";
export const ADAPTER_CONFIG = "adapter_config.json";
/** The PEFT release whose adapter_config.json keys and tensor names rlx writes. */
export const PEFT_VERSION = "0.14.0";

/** Whether `dir` holds a LoRA adapter (adapter_config.json) rather than full weights. */
export function isAdapterDir(dir: string): boolean {
  return existsSync(join(dir, ADAPTER_CONFIG));
}

/** adapter_config.json as PEFT 0.14.0 writes it for a default LoRA on a causal LM. */
export function peftAdapterConfig(spec: LoraSpec, baseDir: string): Record<string, unknown> {
  const config: Record<string, unknown> = {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: resolve(baseDir),
    bias: "none",
    eva_config: null,
    exclude_modules: null,
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layer_replication: null,
    layers_pattern: null,
    layers_to_transform: null,
    loftq_config: {},
    lora_alpha: spec.alpha,
    lora_bias: false,
    lora_dropout: spec.dropout,
    megatron_config: null,
    megatron_core: "megatron.core",
    modules_to_save: null,
    peft_type: "LORA",
    r: spec.rank,
    rank_pattern: {},
    revision: null,
    target_modules: [...spec.targets],
    task_type: "CAUSAL_LM",
    use_dora: false,
    use_rslora: false,
  };
  return Object.fromEntries(Object.entries(config).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** A parsed adapter directory: its LoRA settings, base model directory and tensors. */
export interface Adapter {
  dir: string;
  spec: LoraSpec;
  baseDir: string;
  tensors: Map<string, TensorView>;
}

/**
 * Reads and checks an adapter directory. Anything rlx cannot apply exactly (DoRA, rsLoRA, a
 * trained bias, per-module rank or alpha, a target outside the seven projections) is a
 * ModelFileError naming the key of adapter_config.json.
 */
export function readAdapter(dir: string): Adapter {
  const file = join(dir, ADAPTER_CONFIG);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (err) {
    throw new ModelFileError(`${file} does not parse: ${(err as Error).message}`);
  }
  const bad = (key: string, why: string) =>
    new ModelFileError(`${file}: "${key}" ${why}`, {
      fix: "rlx applies plain LoRA: peft_type LORA, no DoRA/rsLoRA/bias/patterns, targets among q/k/v/o/gate/up/down_proj",
    });
  if (raw.peft_type !== "LORA") throw bad("peft_type", `is ${JSON.stringify(raw.peft_type)}, expected "LORA"`);
  for (const key of ["use_dora", "use_rslora", "fan_in_fan_out", "lora_bias"])
    if (raw[key] !== undefined && raw[key] !== false) throw bad(key, "must be false");
  if (raw.bias !== undefined && raw.bias !== "none") throw bad("bias", 'must be "none"');
  for (const key of ["rank_pattern", "alpha_pattern"])
    if (raw[key] !== undefined && Object.keys(raw[key] ?? {}).length > 0) throw bad(key, "must be empty");
  for (const key of ["layers_to_transform", "modules_to_save"])
    if (raw[key] !== undefined && raw[key] !== null) throw bad(key, "must be null");
  const rank = raw.r;
  if (typeof rank !== "number" || !Number.isInteger(rank) || rank < 1) throw bad("r", "must be an integer >= 1");
  if (typeof raw.lora_alpha !== "number" || !(raw.lora_alpha > 0)) throw bad("lora_alpha", "must be a number > 0");
  const dropout = raw.lora_dropout ?? 0;
  if (typeof dropout !== "number" || dropout < 0 || dropout >= 1) throw bad("lora_dropout", "must be in [0, 1)");
  const targets = raw.target_modules;
  if (!Array.isArray(targets) || targets.length === 0)
    throw bad("target_modules", "must be a non-empty list of module names");
  for (const t of targets)
    if (!LORA_TARGETS.includes(t as LoraTarget))
      throw bad("target_modules", `names "${t}", not one of ${LORA_TARGETS.join(", ")}`);
  const base = raw.base_model_name_or_path;
  if (typeof base !== "string" || base === "")
    throw bad("base_model_name_or_path", "must name the base model's directory");
  const baseDir = resolve(base);
  if (!existsSync(join(baseDir, "config.json")))
    throw new ModelFileError(`${file}: the base model ${baseDir} has no config.json`, {
      fix: `set base_model_name_or_path in ${file} to the local directory of the model the adapter was trained on`,
    });
  assertWhole(dir, checkModelDir(dir), "the adapter directory");
  const weights = join(dir, ADAPTER_WEIGHTS);
  if (!existsSync(weights)) throw new ModelFileError(`${dir}: ${ADAPTER_WEIGHTS} is missing`);
  const ordered = LORA_TARGETS.filter((t) => targets.includes(t));
  return {
    dir,
    spec: { rank, alpha: raw.lora_alpha, dropout, targets: ordered },
    baseDir,
    tensors: readSafetensors(weights).tensors,
  };
}

/** Whether two LoRA settings build the same adapter tensors (rank and targets; alpha is checked too). */
export function sameAdapterShape(a: LoraSpec, b: LoraSpec): boolean {
  return a.rank === b.rank && a.alpha === b.alpha && a.targets.join() === b.targets.join();
}

/**
 * Copies an adapter's tensors into a model that has LoRA with the same settings: every tensor the
 * model expects must be in the file with its shape, and nothing else.
 */
export function applyAdapter(model: NativeModel, adapter: Adapter): void {
  checkedAdapter(model, adapter)();
}

/**
 * Checks every tensor of an adapter against the model's (names, shapes, dtypes) without changing
 * anything, and returns the function that copies them in: a bad file leaves the model as it was.
 */
export function checkedAdapter(model: NativeModel, adapter: Adapter): () => void {
  const file = join(adapter.dir, ADAPTER_WEIGHTS);
  const fix = { fix: "the adapter does not belong to this base model (check base_model_name_or_path)" };
  const writes: (() => void)[] = [];
  const expected = new Set<string>();
  for (const { name, shape } of model.loraParams()) {
    expected.add(name);
    const view = adapter.tensors.get(name);
    if (!view) throw new ModelFileError(`${file}: tensor ${name} is missing`, fix);
    if (view.shape.join() !== shape.join())
      throw new ModelFileError(`${file}: tensor ${name} has shape [${view.shape}], the model's is [${shape}]`, fix);
    const dtype = ({ F32: "f32", BF16: "bf16", F16: "f16", F64: "f64" } as const)[view.dtype as "F32"];
    if (!dtype)
      throw new ModelFileError(`${file}: tensor ${name} is ${view.dtype}; adapters must be F32, BF16, F16 or F64`);
    writes.push(() => model.setParam(name, view.data, dtype, view.shape));
  }
  for (const name of adapter.tensors.keys())
    if (!expected.has(name))
      throw new ModelFileError(`${file}: unexpected tensor ${name} (not an adapter of this model)`, fix);
  return () => writes.forEach((write) => write());
}

/** What saveAdapter wrote (saveModel's SavedModel): the directory, its files, tensor bytes, checksums. */
export interface SavedAdapter {
  dir: string;
  files: string[];
  tensorBytes: number;
  checksums: Checksums;
}

/**
 * Writes the model's adapter (float32) to `dir` atomically in PEFT's layout, with the tokenizer
 * files of `tokenizerDir` beside it; `baseDir` is recorded as base_model_name_or_path.
 */
export function saveAdapter(
  model: NativeModel,
  dir: string,
  options: { baseDir: string; tokenizerDir?: string; writeExtra?: (dir: string) => void },
): SavedAdapter {
  const spec = model.lora;
  if (!spec) throw new ModelFileError(`saving ${dir}: the model has no LoRA adapter`);
  const tmp = join(dirname(dir), `${basename(dir)}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const tensors = model.loraParams().map(({ name, shape }) => ({
      name,
      dtype: "F32" as const,
      shape,
      data: () => model.getParam(name, "f32"),
    }));
    const sum = writeSafetensors(join(tmp, ADAPTER_WEIGHTS), tensors);
    const checksums: Checksums = { [ADAPTER_WEIGHTS]: sum };
    writeFileSync(join(tmp, CHECKSUMS_FILE), checksumsFileText(checksums));
    writeFileSync(join(tmp, ADAPTER_CONFIG), JSON.stringify(peftAdapterConfig(spec, options.baseDir), null, 2));
    const from = options.tokenizerDir ?? options.baseDir;
    for (const name of TOKENIZER_FILES) if (existsSync(join(from, name))) cpSync(join(from, name), join(tmp, name));
    options.writeExtra?.(tmp);
    replaceDir(tmp, dir);
    const bytes = tensors.reduce((n, t) => n + 4 * t.shape.reduce((a, b) => a * b, 1), 0);
    return { dir, files: readdirSync(dir).sort(), tensorBytes: bytes, checksums };
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Gives a freshly loaded model the run's `[model.lora]` adapters: adds them (from `seed`) to a
 * base model, or checks that a model restored from an adapter directory (a checkpoint) carries
 * the same ones. A restored adapter without `[model.lora]`, or with other settings, is a
 * ConfigError naming the key: resuming must not silently change what trains.
 */
export function ensureLora(model: NativeModel, spec: LoraSpec | undefined, seed: number, file: string): void {
  if (model.lora) {
    if (spec && sameAdapterShape(model.lora, spec)) return;
    const had = `rank ${model.lora.rank}, alpha ${model.lora.alpha}, targets ${model.lora.targets.join(", ")}`;
    throw new ConfigError(
      `${file}: [model.lora] ${spec ? "differs from" : "is absent, but"} the adapter the model directory or checkpoint holds (${had})`,
      { fix: "resume with the [model.lora] the run started with" },
    );
  }
  if (spec) model.addLora({ ...spec, targets: LORA_TARGETS.filter((t) => spec.targets.includes(t)) }, seed);
}

/**
 * Gives a served base model empty adapters of the run's shape (A from seed 0, B zeros: what it
 * samples does not change) so that adapters sent over a weight channel fit it; a model that
 * already has these adapters is left as it is, one with others is refused.
 */
export function serveAdapters(model: NativeModel, spec: AdapterShape): void {
  const wanted = { ...spec, dropout: 0, targets: LORA_TARGETS.filter((t) => spec.targets.includes(t)) };
  if (!model.lora) return model.addLora(wanted, 0);
  if (!sameAdapterShape(model.lora, wanted))
    throw new ModelFileError(
      `the served model's adapters (rank ${model.lora.rank}, alpha ${model.lora.alpha}, targets ${model.lora.targets.join(", ")}) are not the run's (rank ${spec.rank}, alpha ${spec.alpha}, targets ${spec.targets.join(", ")})`,
      { fix: "serve the run's base model, or a checkpoint of this run" },
    );
}

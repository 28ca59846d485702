// NativeModel: the TypeScript handle of a shim model (native/src/model.cpp). Parameters cross as
// raw bytes in a named dtype with their shape; the shim converts to the model's dtype and checks
// shapes. Every array length the C side cannot see is checked here, because a short array passed
// through FFI is an out-of-bounds read, not an error.
import type { Pointer } from "bun:ffi";
import { NativeError } from "../errors.ts";
import { check, loadNative, native, type Rlx } from "./ffi.ts";
import { type DType, DTYPE_BYTES } from "../data/dtypes.ts";

/** The normalized flat config the shim reads (src/model/config.ts builds it from config.json). */
export interface ShimModelConfig {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
  rms_norm_eps: number;
  rope_theta: number;
  max_position_embeddings: number;
  tie_word_embeddings: boolean;
  attention_bias: boolean;
  qk_norm: boolean;
  /** RoPE scaling with every default resolved (src/model/rope.ts); absent = plain RoPE. */
  rope_scaling?: ShimRopeScaling;
}

/** Llama 3.1's RoPE scaling (transformers' `rope_type: "llama3"`). */
export interface Llama3RopeScaling {
  rope_type: "llama3";
  factor: number;
  low_freq_factor: number;
  high_freq_factor: number;
  original_max_position_embeddings: number;
}

/** YaRN RoPE scaling (transformers' `rope_type: "yarn"`). */
export interface YarnRopeScaling {
  rope_type: "yarn";
  factor: number;
  beta_fast: number;
  beta_slow: number;
  /** What cos and sin are multiplied by (the paper's mscale, resolved from factor when absent). */
  attention_factor: number;
  original_max_position_embeddings: number;
  truncate: boolean;
}

export type ShimRopeScaling = Llama3RopeScaling | YarnRopeScaling;

export { type DType, DTYPE_BYTES };

/** rlx.h dtype codes (RLX_F32 ...). */
export const DTYPE_CODE: Record<DType, number> = { f32: 0, bf16: 1, f16: 2, f64: 3 };

export interface ParamInfo {
  name: string;
  shape: number[];
}

export type ModelOption = "autocast_bf16" | "logits_chunk" | "fused_attention" | "cpu_linear" | "shard_prefetch";

/** LoRA adapters: W x + (alpha / rank) B A dropout(x) on each target projection of every layer. */
export interface LoraSpec {
  rank: number;
  alpha: number;
  dropout: number;
  /** PEFT module names (LORA_TARGETS of src/model/config.ts). */
  targets: readonly string[];
}

type Bytes = Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array | Float64Array;

/** A NUL-terminated C string for a `const char*` argument. */
export function cstr(s: string): Buffer {
  return Buffer.from(`${s}\0`);
}

const CONFIG_KEYS: (keyof ShimModelConfig)[] = [
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
];

/**
 * The flat JSON the shim parses: exactly the ShimModelConfig keys (extra keys on the object are
 * dropped), RoPE scaling flattened to `rope_type` and `rope_<key>` (rlx.h, rlx_model_create).
 */
export function shimConfigJson(config: ShimModelConfig): string {
  const flat: Record<string, unknown> = Object.fromEntries(CONFIG_KEYS.map((key) => [key, config[key]]));
  if (config.rope_scaling) {
    for (const [key, value] of Object.entries(config.rope_scaling))
      flat[key === "rope_type" ? key : `rope_${key}`] = value;
  }
  return JSON.stringify(flat);
}

/** trainer.shard: how a trainer rank's weights, gradients and AdamW state are spread over the ranks. */
export type ShardMode = "none" | "optimizer" | "full";
export const SHARD_MODE_CODE: Record<Exclude<ShardMode, "none">, number> = { optimizer: 1, full: 2 };

/** rlx_model_shard_layout: each unit's flat (numel, per-rank chunk) and where its parameters lie in it. */
export interface ShardLayout {
  mode: Exclude<ShardMode, "none">;
  rank: number;
  world: number;
  dtype: string;
  units: { name: string; numel: number; chunk: number; params: { name: string; offset: number; shape: number[] }[] }[];
}

export class NativeModel {
  #handle: Pointer | null;
  readonly config: ShimModelConfig;
  readonly dtype: DType;
  readonly device: string;
  #params: ParamInfo[] | null = null;
  #loraParams: ParamInfo[] | null = null;
  #lora: LoraSpec | null = null;
  /** Set by ProcessGroup.shard: the group every train step names (rlx_batch.shard_group). */
  shardGroup: Pointer | null = null;
  /** Set by ProcessGroup.splitRows: the group each row is split over (rlx_batch.context_group). */
  contextGroup: Pointer | null = null;
  /** trainer.activation_checkpointing: each layer recomputed in the backward (always so with "full"). */
  activationCheckpointing = false;

  private constructor(handle: Pointer, config: ShimModelConfig, dtype: DType, device: string) {
    this.#handle = handle;
    this.config = config;
    this.dtype = dtype;
    this.device = device;
  }

  /** A randomly initialized model (normal std 0.02, norms 1) from seed; load weights with setParam. */
  static async create(
    config: ShimModelConfig,
    options: { dtype?: DType; device?: string; seed?: number } = {},
  ): Promise<NativeModel> {
    const lib = await loadNative();
    const dtype = options.dtype ?? "f32";
    const device = options.device ?? "cpu";
    const seed = BigInt(options.seed ?? 0);
    const handle = check(
      lib,
      lib.rlx_model_create(cstr(shimConfigJson(config)), DTYPE_CODE[dtype], cstr(device), seed),
    );
    return new NativeModel(handle as Pointer, config, dtype, device);
  }

  /** Wraps a model the shim made shaped like `like` (a received weight transfer, weights.ts). */
  static adopt(handle: Pointer, like: NativeModel): NativeModel {
    return new NativeModel(handle, like.config, like.dtype, like.device);
  }

  /** The raw handle for other wrappers (train, generate); throws once freed. */
  get handle(): Pointer {
    if (this.#handle === null) throw new NativeError("this model has been freed");
    return this.#handle;
  }

  get lib(): Rlx {
    return native();
  }

  /** Parameters in the shim's fixed order, with HF names. */
  params(): ParamInfo[] {
    this.#params ??= JSON.parse(String(check(this.lib, this.lib.rlx_model_params(this.handle)))) as ParamInfo[];
    return this.#params;
  }

  /**
   * Adds LoRA adapters (A from `seed`, B zeros: the model is unchanged until trained) and freezes
   * the base parameters; an optimizer created afterwards updates the adapters only.
   */
  addLora(spec: LoraSpec, seed = 0): void {
    check(
      this.lib,
      this.lib.rlx_model_lora_add(
        this.handle,
        spec.rank,
        spec.alpha,
        spec.dropout,
        cstr(spec.targets.join(",")),
        BigInt(seed),
      ),
    );
    this.#lora = { ...spec, targets: [...spec.targets] };
    this.#loraParams = null;
  }

  /** The LoRA adapters this model carries (null: none). */
  get lora(): LoraSpec | null {
    return this.#lora;
  }

  /** The adapter tensors with PEFT's saved names ([] without LoRA). */
  loraParams(): ParamInfo[] {
    this.#loraParams ??= JSON.parse(
      String(check(this.lib, this.lib.rlx_model_lora_params(this.handle))),
    ) as ParamInfo[];
    return this.#loraParams;
  }

  /** A base parameter with its LoRA adapter merged in (W + (alpha / rank) B A), as raw bytes of `dtype`. */
  getMergedParam(name: string, dtype: DType = this.dtype): Uint8Array {
    return this.#copyOut(name, dtype, "rlx_model_get_merged_param");
  }

  /** A base parameter or, with LoRA, an adapter tensor by its PEFT name. */
  param(name: string): ParamInfo {
    const info = this.params().find((p) => p.name === name) ?? this.loraParams().find((p) => p.name === name);
    if (!info) throw new NativeError(`the model has no parameter "${name}"`);
    return info;
  }

  /** Copies data (raw values of `dtype`, in row-major `shape`) into a parameter. */
  setParam(name: string, data: Bytes, dtype: DType, shape: number[]): void {
    const numel = shape.reduce((a, b) => a * b, 1);
    if (data.byteLength !== numel * DTYPE_BYTES[dtype]) {
      throw new NativeError(
        `setParam("${name}"): shape [${shape.join(", ")}] as ${dtype} needs ${numel * DTYPE_BYTES[dtype]} bytes, got ${data.byteLength}`,
      );
    }
    check(
      this.lib,
      this.lib.rlx_model_set_param(
        this.handle,
        cstr(name),
        data,
        DTYPE_CODE[dtype],
        BigInt64Array.from(shape.map(BigInt)),
        shape.length,
      ),
    );
  }

  /** A parameter's values as raw bytes of `dtype` (default: the model's dtype). */
  getParam(name: string, dtype: DType = this.dtype): Uint8Array {
    return this.#copyOut(name, dtype, "rlx_model_get_param");
  }

  /** A parameter's accumulated gradient as raw bytes of `dtype` (zeros when it has none). */
  getGrad(name: string, dtype: DType = this.dtype): Uint8Array {
    return this.#copyOut(name, dtype, "rlx_model_get_grad");
  }

  zeroGrad(): void {
    check(this.lib, this.lib.rlx_model_zero_grad(this.handle));
  }

  /** Where every parameter lies in its unit and this rank's slice of each (a sharded model only). */
  shardLayout(): ShardLayout {
    return JSON.parse(String(check(this.lib, this.lib.rlx_model_shard_layout(this.handle)))) as ShardLayout;
  }

  /** This rank's slice of unit `unit`, as raw bytes of the model's dtype. */
  readSlice(unit: number): Uint8Array {
    const out = new Uint8Array(this.shardLayout().units[unit]!.chunk * DTYPE_BYTES[this.dtype]);
    check(this.lib, this.lib.rlx_model_shard_local(this.handle, unit, out, out.byteLength, 0));
    return out;
  }

  /** Overwrites this rank's slice of unit `unit`; then gatherSlices() (collective) for "optimizer". */
  writeSlice(unit: number, data: Uint8Array): void {
    check(this.lib, this.lib.rlx_model_shard_local(this.handle, unit, data, data.byteLength, 1));
  }

  /** "optimizer": the slices all-gathered into the whole parameters; "full": nothing. Collective. */
  gatherSlices(): void {
    check(this.lib, this.lib.rlx_model_shard_gather(this.handle));
  }

  setOption(name: ModelOption, value: number | boolean): void {
    check(this.lib, this.lib.rlx_model_set_option(this.handle, cstr(name), Number(value)));
  }

  /** Idempotent: a second free (or a dispose after free) does nothing. */
  free(): void {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    check(this.lib, this.lib.rlx_model_free(handle));
  }

  [Symbol.dispose](): void {
    this.free();
  }

  /** Forgets the handle without freeing it: the shim took the model over (WeightReceiver.start). */
  disown(): void {
    this.#handle = null;
  }

  #copyOut(
    name: string,
    dtype: DType,
    fn: "rlx_model_get_param" | "rlx_model_get_grad" | "rlx_model_get_merged_param",
  ): Uint8Array {
    const numel = this.param(name).shape.reduce((a, b) => a * b, 1);
    const out = new Uint8Array(numel * DTYPE_BYTES[dtype]);
    check(this.lib, this.lib[fn](this.handle, cstr(name), out, DTYPE_CODE[dtype], out.byteLength));
    return out;
  }
}

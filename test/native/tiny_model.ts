// Shared fixtures for the native tests: a micro Llama/Qwen config, a seeded PRNG, parameter and
// gradient read-out as float64, and packed-row builders. Not a test file itself.
import { NativeModel, type DType, type LoraSpec, type ShimModelConfig } from "../../src/native/model.ts";
import { Rng } from "../../src/envs/random.ts";
import type { TrainRow } from "../../src/data/train_row.ts";

export const TINY: ShimModelConfig = {
  vocab_size: 64,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 256,
  tie_word_embeddings: false,
  attention_bias: false,
  qk_norm: false,
};

/** Every optional architecture feature on: Qwen3-style q/k norm, Qwen2-style bias. */
export const TINY_FULL: ShimModelConfig = { ...TINY, attention_bias: true, qk_norm: true };

/** A small deterministic PRNG in [0, 1) (the envs' mulberry32). */
export function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.next();
}

export function f64(bytes: Uint8Array): Float64Array {
  return new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
}

export function f32(bytes: Uint8Array): Float32Array {
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

/**
 * A micro model. `sharpen` scales the output head so next-token distributions are peaked (a random
 * model is close to uniform, which makes greedy/argmax and trust-region tests meaningless).
 */
export async function tinyModel(
  options: { dtype?: DType; seed?: number; config?: ShimModelConfig; sharpen?: number; device?: string } = {},
): Promise<NativeModel> {
  const config = options.config ?? TINY;
  const model = await NativeModel.create(config, {
    dtype: options.dtype ?? "f32",
    seed: options.seed ?? 1,
    device: options.device ?? "cpu",
  });
  if (options.sharpen) {
    const head = config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    const w = f64(model.getParam(head, "f64")).map((x) => x * options.sharpen!);
    model.setParam(head, w, "f64", model.param(head).shape);
  }
  return model;
}

export function readParams(model: NativeModel): Map<string, Float64Array> {
  return new Map(model.params().map((p) => [p.name, f64(model.getParam(p.name, "f64"))]));
}

/** The LoRA adapters the data-parallel tests train (test/native/dist.test.ts). */
export const DIST_LORA: LoraSpec = { rank: 2, alpha: 4, dropout: 0, targets: ["q_proj", "o_proj", "up_proj"] };

export function readLoraParams(model: NativeModel): Map<string, Float64Array> {
  return new Map(model.loraParams().map((p) => [p.name, f64(model.getParam(p.name, "f64"))]));
}

export function readLoraGrads(model: NativeModel): Map<string, Float64Array> {
  return new Map(model.loraParams().map((p) => [p.name, f64(model.getGrad(p.name, "f64"))]));
}

export function readGrads(model: NativeModel): Map<string, Float64Array> {
  return new Map(model.params().map((p) => [p.name, f64(model.getGrad(p.name, "f64"))]));
}

/** Largest |a - b| over every parameter, relative to max(1, largest |b|). */
export function maxRelDiff(a: Map<string, Float64Array>, b: Map<string, Float64Array>): number {
  let diff = 0;
  let scale = 1;
  for (const [name, x] of a) {
    const y = b.get(name)!;
    for (let i = 0; i < x.length; i++) {
      diff = Math.max(diff, Math.abs(x[i]! - y[i]!));
      scale = Math.max(scale, Math.abs(y[i]!));
    }
  }
  return diff / scale;
}

/** A training sample in the flat form (docs/architecture.md §4), before packing. */
export interface Sample {
  tokenIds: number[];
  lossMask: number[];
  advantages: number[];
  inferenceLogprobs: number[];
  temperature: number;
  refLogprobs?: number[];
  rlWeights?: number[];
  ceWeights?: number[];
  refKlWeights?: number[];
  env?: number;
}

/** Packs samples into one row; absent streams get the docs/architecture.md §4 defaults where another sample has them. */
export function pack(samples: Sample[]): TrainRow {
  const T = samples.reduce((n, s) => n + s.tokenIds.length, 0);
  const cat = (get: (s: Sample) => number[] | undefined, fill: (s: Sample) => number) =>
    samples.flatMap((s) => get(s) ?? new Array<number>(s.tokenIds.length).fill(fill(s)));
  const optional = (get: (s: Sample) => number[] | undefined, fill: (s: Sample) => number) =>
    samples.some((s) => get(s)) ? Float32Array.from(cat(get, fill)) : undefined;
  const row: TrainRow = {
    tokenIds: Int32Array.from(
      cat(
        (s) => s.tokenIds,
        () => 0,
      ),
    ),
    sampleLengths: Int32Array.from(samples.map((s) => s.tokenIds.length)),
    lossMask: Uint8Array.from(
      cat(
        (s) => s.lossMask,
        () => 0,
      ),
    ),
    advantages: Float32Array.from(
      cat(
        (s) => s.advantages,
        () => 0,
      ),
    ),
    inferenceLogprobs: Float32Array.from(
      cat(
        (s) => s.inferenceLogprobs,
        () => 0,
      ),
    ),
    temperatures: Float32Array.from(
      cat(
        () => undefined,
        (s) => s.temperature,
      ),
    ),
    refLogprobs: optional(
      (s) => s.refLogprobs,
      () => 0,
    ),
    rlWeights: optional(
      (s) => s.rlWeights,
      () => 1,
    ),
    ceWeights: optional(
      (s) => s.ceWeights,
      () => 0,
    ),
    refKlWeights: optional(
      (s) => s.refKlWeights,
      () => 0,
    ),
  };
  if (samples.some((s) => s.env !== undefined))
    row.envIndex = Int32Array.from(
      cat(
        () => undefined,
        (s) => s.env ?? -1,
      ),
    );
  if (row.tokenIds.length !== T) throw new Error("pack: lengths disagree");
  return row;
}

/** Random token ids with a fixed prompt/completion split: mask 1 after `prompt` tokens. */
export function randomSample(rand: () => number, length: number, prompt: number, vocab = TINY.vocab_size): Sample {
  const tokenIds = Array.from({ length }, () => Math.floor(rand() * vocab));
  const lossMask = tokenIds.map((_, i) => (i >= prompt ? 1 : 0));
  return {
    tokenIds,
    lossMask,
    advantages: lossMask.map((m) => (m ? rand() * 2 - 1 : 0)),
    inferenceLogprobs: new Array<number>(length).fill(0),
    temperature: 1,
  };
}
